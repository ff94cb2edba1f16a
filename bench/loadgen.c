/*
 * loadgen: AMQP 1.0 load client for the subgate benchmarks, on the Proton-C proactor API.
 *
 * One thread drives every connection through one proactor, so the client costs one core at most and leaves
 * the other to the broker.  Messages are encoded once (an optional header section with durable=true and one
 * data section) and the same bytes are sent for every transfer; received messages are read and discarded
 * without decoding.  Modes:
 *
 *   send     N messages to an address, unsettled, at most W in flight; counts `accepted` outcomes
 *   recv     N messages from an address with a credit window of W, accepting each
 *   pair     send and recv at once on two connections; end-to-end rate (first send .. last receipt)
 *   fanout   K receiver connections on one address, then one sender of N messages: N*K deliveries
 *   latency  one message in flight, sent on one link and received on another; p50/p99/mean round trip
 *
 * Options for issue 13: --publisher-id ID numbers every message it sends (message annotations x-opt-publisher-id
 * and x-opt-publisher-seq, seq = --seq-start + message index; only those 8 bytes are rewritten per message), and
 * --bookmark VALUE puts the subgate-bookmark filter on the receiver's source (replay from that position).
 *
 * The result is one JSON line on stdout.  Exit status: 0 done, 1 protocol error or an outcome other than
 * `accepted`, 2 usage, 3 deadline passed.  See bench/README.md.
 */
#define _POSIX_C_SOURCE 200809L

#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/event.h>
#include <proton/link.h>
#include <proton/proactor.h>
#include <proton/sasl.h>
#include <proton/session.h>
#include <proton/terminus.h>
#include <proton/transport.h>

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 260
#define EXIT_PROTOCOL 1
#define EXIT_USAGE 2
#define EXIT_DEADLINE 3

enum mode { M_SEND, M_RECV, M_PAIR, M_FANOUT, M_LATENCY, M_SUBSCRIBE };
static const char *mode_names[] = {"send", "recv", "pair", "fanout", "latency", "subscribe"};
#define NMODES 6

typedef struct endpoint {
    int index;
    pn_connection_t *conn;
    bool want_sender, want_receiver;
    pn_link_t *snd, *rcv;
    bool snd_open, rcv_open;
    long received;       /* deliveries accepted on this endpoint's receiver */
    long credit_granted; /* total credit ever issued, capped at what this receiver must take */
    long recv_target;    /* how many this receiver must take */
    bool transport_closed;
} endpoint_t;

static struct {
    /* options */
    enum mode mode;
    const char *host, *port, *address;
    long count, warmup;
    int size, window, receivers;
    bool durable;
    const char *cap; /* NULL: no capability */
    int terminus_durability;
    const char *sasl, *user, *password;
    double timeout_s;
    const char *container;
    const char *sub;       /* --sub NAME: receivers attach as a JMS durable subscription named NAME */
    const char *client_id; /* --client-id ID: the exact container-id (a durable subscription's ClientID) */
    const char *publisher_id; /* --publisher-id ID: x-opt-publisher-id/-seq annotations on every message */
    uint64_t seq_start;       /* --seq-start N: x-opt-publisher-seq of the first message (1) */
    const char *bookmark;     /* --bookmark VALUE: subgate-bookmark source filter on the receiver */

    /* run state */
    pn_proactor_t *proactor;
    endpoint_t eps[MAX_CONNS];
    int neps;
    endpoint_t *sender_ep;
    unsigned char *msg;
    size_t msg_len;
    size_t seq_off; /* with --publisher-id: offset of the 8 big-endian bytes of x-opt-publisher-seq in msg */
    char rbuf[65536];

    long sent, settled, accepted;
    long received_total;
    int receivers_open;
    bool sending_gate; /* fanout: open once every receiver is attached */

    double t_start, t_ready, t_first_send, t_last_ack, t_first_recv, t_last_recv;

    /* latency */
    double t_inflight;
    bool got_msg, got_outcome, inflight;
    long rounds_done;
    double *samples;
    long nsamples;

    bool finished;
    int closed_count;
    int exit_code;
    char error[512];
} A;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void finish(void);

static void fail(int code, const char *fmt, ...) {
    if (A.exit_code == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(A.error, sizeof A.error, fmt, ap);
        va_end(ap);
        A.exit_code = code;
    }
    finish();
}

/* Everyone is done (or something failed): ask every connection to close from its own event batch. */
static void finish(void) {
    if (A.finished) return;
    A.finished = true;
    for (int i = 0; i < A.neps; i++) {
        if (!A.eps[i].transport_closed) pn_connection_wake(A.eps[i].conn);
    }
    pn_proactor_set_timeout(A.proactor, 5000); /* grace period for the close handshakes */
}

static void check_done(void) {
    switch (A.mode) {
    case M_SEND:
        if (A.settled == A.count) finish();
        break;
    case M_RECV:
        if (A.received_total == A.count) finish();
        break;
    case M_PAIR:
        if (A.settled == A.count && A.received_total == A.count) finish();
        break;
    case M_FANOUT:
        if (A.settled == A.count && A.received_total == A.count * A.receivers) finish();
        break;
    case M_LATENCY:
        if (A.rounds_done == A.warmup + A.count) finish();
        break;
    case M_SUBSCRIBE:
        break;
    }
}

/* ---- message encoding: [header(durable=true)] [message-annotations] data(binary S) ---- */

static unsigned char *put_u32(unsigned char *p, uint32_t n) {
    *p++ = (unsigned char)(n >> 24);
    *p++ = (unsigned char)(n >> 16);
    *p++ = (unsigned char)(n >> 8);
    *p++ = (unsigned char)n;
    return p;
}

static unsigned char *put_sym8(unsigned char *p, const char *s) {
    size_t n = strlen(s);
    *p++ = 0xa3; /* sym8 */
    *p++ = (unsigned char)n;
    memcpy(p, s, n);
    return p + n;
}

/* message-annotations {x-opt-publisher-id: str32 ID, x-opt-publisher-seq: ulong (8 bytes, patched per message)} */
static unsigned char *encode_annotations(unsigned char *p) {
    static const char K_ID[] = "x-opt-publisher-id", K_SEQ[] = "x-opt-publisher-seq";
    size_t idlen = strlen(A.publisher_id);
    uint32_t body = 4 + (2 + sizeof K_ID - 1) + (5 + (uint32_t)idlen) + (2 + sizeof K_SEQ - 1) + 9;
    *p++ = 0x00; /* descriptor smallulong 0x72: message-annotations */
    *p++ = 0x53;
    *p++ = 0x72;
    *p++ = 0xd1; /* map32: size, count (keys + values) */
    p = put_u32(p, body);
    p = put_u32(p, 4);
    p = put_sym8(p, K_ID);
    *p++ = 0xb1; /* str32-utf8 */
    p = put_u32(p, (uint32_t)idlen);
    memcpy(p, A.publisher_id, idlen);
    p += idlen;
    p = put_sym8(p, K_SEQ);
    *p++ = 0x80; /* ulong */
    A.seq_off = (size_t)(p - A.msg);
    return p + 8;
}

static void set_seq(uint64_t seq) {
    unsigned char *p = A.msg + A.seq_off;
    for (int i = 7; i >= 0; i--) {
        p[i] = (unsigned char)seq;
        seq >>= 8;
    }
}

static void encode_message(void) {
    size_t cap = (size_t)A.size + 32 + (A.publisher_id ? strlen(A.publisher_id) + 80 : 0);
    A.msg = malloc(cap);
    unsigned char *p = A.msg;
    if (A.durable) {
        /* described list: descriptor smallulong 0x70 (header), list8 size=2 count=1, true */
        const unsigned char hdr[] = {0x00, 0x53, 0x70, 0xc0, 0x02, 0x01, 0x41};
        memcpy(p, hdr, sizeof hdr);
        p += sizeof hdr;
    }
    if (A.publisher_id) p = encode_annotations(p);
    *p++ = 0x00; /* descriptor smallulong 0x75: data section */
    *p++ = 0x53;
    *p++ = 0x75;
    uint32_t n = (uint32_t)A.size;
    if (n < 256) {
        *p++ = 0xa0; /* vbin8 */
        *p++ = (unsigned char)n;
    } else {
        *p++ = 0xb0; /* vbin32 */
        p = put_u32(p, n);
    }
    for (uint32_t i = 0; i < n; i++) p[i] = (unsigned char)('a' + i % 26);
    p += n;
    A.msg_len = (size_t)(p - A.msg);
}

/* ---- link setup ---- */

static void set_terminus(pn_terminus_t *t) {
    pn_terminus_set_address(t, A.address);
    if (A.terminus_durability) pn_terminus_set_durability(t, (pn_durability_t)A.terminus_durability);
    if (A.cap) {
        pn_data_t *caps = pn_terminus_capabilities(t);
        pn_data_put_array(caps, false, PN_SYMBOL);
        pn_data_enter(caps);
        pn_data_put_symbol(caps, pn_bytes(strlen(A.cap), A.cap));
        pn_data_exit(caps);
    }
}

/* What Qpid JMS sends for createDurableSubscriber (jms-amqp-mapping §2): durable=unsettled-state,
 * expiry-policy=never, distribution-mode=copy; capabilities come from --cap (topic). */
static void set_durable_subscription(pn_terminus_t *t) {
    pn_terminus_set_durability(t, PN_DELIVERIES);
    pn_terminus_set_expiry_policy(t, PN_EXPIRE_NEVER);
    pn_terminus_set_distribution_mode(t, PN_DIST_MODE_COPY);
}

/* {symbol subgate-bookmark: described(symbol subgate:bookmark:string, string VALUE)} (docs/bookmarks.md) */
static void set_bookmark_filter(pn_terminus_t *t) {
    static const char KEY[] = "subgate-bookmark", DESC[] = "subgate:bookmark:string";
    pn_data_t *f = pn_terminus_filter(t);
    pn_data_put_map(f);
    pn_data_enter(f);
    pn_data_put_symbol(f, pn_bytes(sizeof KEY - 1, KEY));
    pn_data_put_described(f);
    pn_data_enter(f);
    pn_data_put_symbol(f, pn_bytes(sizeof DESC - 1, DESC));
    pn_data_put_string(f, pn_bytes(strlen(A.bookmark), A.bookmark));
    pn_data_exit(f);
    pn_data_exit(f);
}

static pn_link_t *open_receiver(pn_session_t *s, const char *name, const char *address) {
    pn_link_t *l = pn_receiver(s, name);
    pn_link_set_snd_settle_mode(l, PN_SND_UNSETTLED);
    pn_link_set_rcv_settle_mode(l, PN_RCV_FIRST);
    set_terminus(pn_link_source(l));
    if (address) pn_terminus_set_address(pn_link_source(l), address);
    if (A.sub) set_durable_subscription(pn_link_source(l));
    if (A.bookmark) set_bookmark_filter(pn_link_source(l));
    pn_terminus_set_address(pn_link_target(l), name);
    pn_link_open(l);
    return l;
}

static void grant_credit(endpoint_t *ep) {
    pn_link_t *l = ep->rcv;
    int credit = pn_link_credit(l);
    if (credit >= A.window / 2 && ep->credit_granted > 0) return;
    long want = A.window - credit;
    long left = ep->recv_target - ep->credit_granted;
    if (want > left) want = left;
    if (want > 0) {
        pn_link_flow(l, (int)want);
        ep->credit_granted += want;
    }
}

static void open_endpoint(endpoint_t *ep) {
    pn_connection_t *c = ep->conn;
    char name[96];
    if (A.client_id)
        snprintf(name, sizeof name, "%s", A.client_id);
    else
        snprintf(name, sizeof name, "%s-%d", A.container, ep->index);
    pn_connection_set_container(c, name);
    pn_connection_open(c);
    pn_session_t *s = pn_session(c);
    pn_session_open(s);
    if (ep->want_sender) {
        snprintf(name, sizeof name, "loadgen-snd-%d", ep->index);
        pn_link_t *l = pn_sender(s, name);
        pn_link_set_snd_settle_mode(l, PN_SND_UNSETTLED);
        pn_link_set_rcv_settle_mode(l, PN_RCV_FIRST);
        set_terminus(pn_link_target(l));
        pn_terminus_set_address(pn_link_source(l), name);
        pn_link_open(l);
        ep->snd = l;
    }
    if (A.mode == M_SUBSCRIBE) {
        /* K durable subscriptions, no credit: NAME (K=1) or NAME.i on ADDRESS.i (K>1) */
        char address[256];
        for (int i = 0; i < A.receivers; i++) {
            if (A.receivers == 1) {
                snprintf(name, sizeof name, "%s", A.sub);
                snprintf(address, sizeof address, "%s", A.address);
            } else {
                snprintf(name, sizeof name, "%s.%d", A.sub, i);
                snprintf(address, sizeof address, "%s.%d", A.address, i);
            }
            open_receiver(s, name, address);
        }
    } else if (ep->want_receiver) {
        if (A.sub)
            snprintf(name, sizeof name, "%s", A.sub);
        else
            snprintf(name, sizeof name, "loadgen-rcv-%d", ep->index);
        ep->rcv = open_receiver(s, name, NULL);
        /* With --bookmark the first credit waits for the attach answer: subgate holds a replay's attach while
         * its journal places it and drops credit granted meanwhile (found while writing bench/bookmarks.py). */
        if (!A.bookmark) grant_credit(ep);
    }
}

/* ---- sending ---- */

static bool may_send(void) {
    if (A.finished) return false;
    if (A.mode == M_FANOUT && !A.sending_gate) return false;
    return true;
}

static void send_one(pn_link_t *l) {
    uint64_t tag = (uint64_t)A.sent;
    pn_delivery(l, pn_dtag((const char *)&tag, sizeof tag));
    if (A.publisher_id) set_seq(A.seq_start + (uint64_t)A.sent);
    pn_link_send(l, (const char *)A.msg, A.msg_len);
    pn_link_advance(l);
    double t = now_s();
    if (A.sent == 0) A.t_first_send = t;
    A.sent++;
    if (A.mode == M_LATENCY) {
        A.t_inflight = t;
        A.inflight = true;
        A.got_msg = A.got_outcome = false;
    }
}

static void try_send(endpoint_t *ep) {
    pn_link_t *l = ep->snd;
    if (!l || !ep->snd_open || !may_send()) return;
    if (A.mode == M_LATENCY) {
        if (!A.inflight && A.sent < A.warmup + A.count && pn_link_credit(l) > 0 && ep->rcv_open) send_one(l);
        return;
    }
    while (A.sent < A.count && A.sent - A.settled < A.window && pn_link_credit(l) > 0) send_one(l);
}

static void latency_round_complete(endpoint_t *ep) {
    double rtt = A.t_last_recv - A.t_inflight;
    if (A.rounds_done >= A.warmup) A.samples[A.nsamples++] = rtt;
    A.rounds_done++;
    A.inflight = false;
    check_done();
    try_send(ep);
}

static void on_sender_delivery(endpoint_t *ep, pn_delivery_t *d) {
    if (!pn_delivery_updated(d)) return;
    uint64_t state = pn_delivery_remote_state(d);
    if (state == 0 && !pn_delivery_settled(d)) return;
    if (state == PN_RECEIVED) return; /* not a terminal outcome */
    pn_delivery_clear(d);
    if (state != PN_ACCEPTED) {
        const char *what = state == PN_REJECTED   ? "rejected"
                           : state == PN_RELEASED ? "released"
                           : state == PN_MODIFIED ? "modified"
                           : state == 0           ? "settled without outcome"
                                                  : "unknown outcome";
        pn_condition_t *cond = pn_disposition_condition(pn_delivery_remote(d));
        char extra[300] = "";
        if (pn_condition_is_set(cond))
            snprintf(extra, sizeof extra, ": %s: %s", pn_condition_get_name(cond),
                     pn_condition_get_description(cond) ? pn_condition_get_description(cond) : "");
        pn_delivery_settle(d);
        A.settled++;
        fail(EXIT_PROTOCOL, "delivery %ld: %s%s", A.settled, what, extra);
        return;
    }
    pn_delivery_settle(d);
    A.settled++;
    A.accepted++;
    A.t_last_ack = now_s();
    if (A.mode == M_LATENCY) {
        A.got_outcome = true;
        if (A.got_msg) latency_round_complete(ep);
        return;
    }
    check_done();
    try_send(ep);
}

/* ---- receiving ---- */

static void on_receiver_delivery(endpoint_t *ep) {
    pn_link_t *l = ep->rcv;
    pn_delivery_t *d;
    while ((d = pn_link_current(l)) != NULL && pn_delivery_readable(d) && !pn_delivery_partial(d)) {
        ssize_t n;
        while ((n = pn_link_recv(l, A.rbuf, sizeof A.rbuf)) > 0) {
        }
        if (n != PN_EOS && n != 0) {
            fail(EXIT_PROTOCOL, "pn_link_recv failed: %zd", n);
            return;
        }
        pn_link_advance(l);
        pn_delivery_update(d, PN_ACCEPTED);
        pn_delivery_settle(d);
        double t = now_s();
        if (A.received_total == 0) A.t_first_recv = t;
        A.t_last_recv = t;
        A.received_total++;
        ep->received++;
        if (A.mode == M_LATENCY) {
            A.got_msg = true;
            if (A.got_outcome) latency_round_complete(ep);
        } else if (A.mode == M_FANOUT && ep->received > A.count) {
            fail(EXIT_PROTOCOL, "receiver %d got more than %ld messages", ep->index, A.count);
            return;
        }
    }
    if (!A.finished) grant_credit(ep);
    if (A.mode != M_LATENCY) check_done();
}

/* ---- events ---- */

static void check_condition(const char *what, pn_condition_t *cond, bool closing_is_error) {
    if (pn_condition_is_set(cond)) {
        fail(EXIT_PROTOCOL, "%s: %s: %s", what, pn_condition_get_name(cond),
             pn_condition_get_description(cond) ? pn_condition_get_description(cond) : "");
    } else if (closing_is_error && !A.finished) {
        fail(EXIT_PROTOCOL, "%s by the peer before the run was over", what);
    }
}

static void on_link_remote_open(endpoint_t *ep, pn_link_t *l) {
    if (A.mode == M_SUBSCRIBE) {
        if (pn_link_is_receiver(l) && ++A.receivers_open == A.receivers) {
            A.t_ready = now_s();
            finish();
        }
        return;
    }
    if (l == ep->snd) {
        ep->snd_open = true;
        try_send(ep);
    } else if (l == ep->rcv) {
        ep->rcv_open = true;
        A.receivers_open++;
        if (A.bookmark) grant_credit(ep);
        if (A.mode == M_FANOUT && A.receivers_open == A.receivers && !A.sending_gate) {
            A.sending_gate = true;
            A.t_ready = now_s();
            pn_connection_wake(A.sender_ep->conn);
        }
        if (A.mode == M_LATENCY) try_send(ep);
    }
}

static bool handle(pn_event_t *e) {
    pn_connection_t *c = pn_event_connection(e);
    endpoint_t *ep = c ? (endpoint_t *)pn_connection_get_context(c) : NULL;

    switch (pn_event_type(e)) {
    case PN_CONNECTION_INIT:
        open_endpoint(ep);
        break;

    case PN_CONNECTION_WAKE:
        if (A.finished) {
            if (pn_connection_state(c) & PN_LOCAL_ACTIVE) pn_connection_close(c);
        } else {
            try_send(ep);
        }
        break;

    case PN_LINK_REMOTE_OPEN:
        on_link_remote_open(ep, pn_event_link(e));
        break;

    case PN_LINK_FLOW: {
        pn_link_t *l = pn_event_link(e);
        if (l == ep->snd) try_send(ep);
        break;
    }

    case PN_DELIVERY: {
        pn_link_t *l = pn_event_link(e);
        if (l == ep->snd)
            on_sender_delivery(ep, pn_event_delivery(e));
        else if (l == ep->rcv)
            on_receiver_delivery(ep);
        break;
    }

    case PN_LINK_REMOTE_CLOSE:
    case PN_LINK_REMOTE_DETACH:
        check_condition(pn_link_is_sender(pn_event_link(e)) ? "sender link closed" : "receiver link closed",
                        pn_link_remote_condition(pn_event_link(e)), true);
        if (pn_link_state(pn_event_link(e)) & PN_LOCAL_ACTIVE) pn_link_close(pn_event_link(e));
        break;

    case PN_SESSION_REMOTE_CLOSE:
        check_condition("session closed", pn_session_remote_condition(pn_event_session(e)), true);
        if (pn_session_state(pn_event_session(e)) & PN_LOCAL_ACTIVE) pn_session_close(pn_event_session(e));
        break;

    case PN_CONNECTION_REMOTE_CLOSE:
        check_condition("connection closed", pn_connection_remote_condition(c), true);
        if (pn_connection_state(c) & PN_LOCAL_ACTIVE) pn_connection_close(c);
        break;

    case PN_TRANSPORT_CLOSED:
        if (ep && !ep->transport_closed) {
            ep->transport_closed = true;
            A.closed_count++;
        }
        check_condition("transport closed", pn_transport_condition(pn_event_transport(e)), true);
        if (A.closed_count == A.neps) return false;
        break;

    case PN_PROACTOR_TIMEOUT:
        if (A.finished) return false; /* grace period over */
        fail(EXIT_DEADLINE, "deadline of %.0f s passed", A.timeout_s);
        break;

    case PN_PROACTOR_INACTIVE:
        return false;

    default:
        break;
    }
    return true;
}

/* ---- output ---- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(const double *v, long n, double p) {
    if (n == 0) return 0;
    long i = (long)(p / 100.0 * (double)(n - 1) + 0.5);
    if (i >= n) i = n - 1;
    return v[i];
}

static void print_result(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
                 (double)ru.ru_stime.tv_usec / 1e6;
    printf("{\"mode\":\"%s\",\"ok\":%s,\"count\":%ld,\"size\":%d,\"window\":%d,\"durable\":%s", mode_names[A.mode],
           A.exit_code ? "false" : "true", A.count, A.size, A.window, A.durable ? "true" : "false");
    printf(",\"sent\":%ld,\"accepted\":%ld,\"received\":%ld", A.sent, A.accepted, A.received_total);
    double secs = 0, rate = 0;
    switch (A.mode) {
    case M_SEND:
        secs = A.accepted ? A.t_last_ack - A.t_first_send : 0;
        rate = secs > 0 ? (double)A.accepted / secs : 0;
        break;
    case M_RECV:
        secs = A.received_total ? A.t_last_recv - A.t_first_recv : 0;
        rate = secs > 0 ? (double)A.received_total / secs : 0;
        break;
    case M_PAIR: {
        double end = A.t_last_recv > A.t_last_ack ? A.t_last_recv : A.t_last_ack;
        secs = A.sent ? end - A.t_first_send : 0;
        rate = secs > 0 ? (double)A.received_total / secs : 0;
        double ss = A.accepted ? A.t_last_ack - A.t_first_send : 0;
        printf(",\"send_seconds\":%.6f,\"send_msgs_per_sec\":%.1f", ss, ss > 0 ? (double)A.accepted / ss : 0.0);
        break;
    }
    case M_FANOUT: {
        double end = A.t_last_recv > A.t_last_ack ? A.t_last_recv : A.t_last_ack;
        secs = A.sent ? end - A.t_first_send : 0;
        rate = secs > 0 ? (double)A.received_total / secs : 0;
        printf(",\"receivers\":%d,\"deliveries\":%ld,\"deliveries_per_sec\":%.1f", A.receivers, A.received_total,
               rate);
        break;
    }
    case M_SUBSCRIBE:
        secs = A.t_ready > 0 ? A.t_ready - A.t_start : 0;
        printf(",\"subscriptions\":%d", A.receivers_open);
        break;
    case M_LATENCY: {
        qsort(A.samples, (size_t)A.nsamples, sizeof(double), cmp_double);
        double sum = 0;
        for (long i = 0; i < A.nsamples; i++) sum += A.samples[i];
        double mean = A.nsamples ? sum / (double)A.nsamples : 0;
        secs = A.sent ? A.t_last_recv - A.t_first_send : 0;
        rate = secs > 0 ? (double)A.rounds_done / secs : 0;
        printf(",\"warmup\":%ld,\"samples\":%ld,\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,\"mean_us\":%.1f"
               ",\"min_us\":%.1f,\"max_us\":%.1f",
               A.warmup, A.nsamples, pct(A.samples, A.nsamples, 50) * 1e6, pct(A.samples, A.nsamples, 90) * 1e6,
               pct(A.samples, A.nsamples, 99) * 1e6, mean * 1e6, A.nsamples ? A.samples[0] * 1e6 : 0.0,
               A.nsamples ? A.samples[A.nsamples - 1] * 1e6 : 0.0);
        break;
    }
    }
    printf(",\"seconds\":%.6f,\"msgs_per_sec\":%.1f,\"client_cpu_seconds\":%.3f", secs, rate, cpu);
    if (A.exit_code) {
        printf(",\"error\":\"");
        for (const char *p = A.error; *p; p++) {
            if (*p == '"' || *p == '\\')
                printf("\\%c", *p);
            else if ((unsigned char)*p < 0x20)
                putchar(' ');
            else
                putchar(*p);
        }
        printf("\"");
    }
    printf("}\n");
    fflush(stdout);
}

/* ---- command line ---- */

static void usage(void) {
    fprintf(stderr,
            "usage: loadgen MODE --port P [options]\n"
            "  MODE               send | recv | pair | fanout | latency | subscribe\n"
            "  --host H           broker host (127.0.0.1)\n"
            "  --port P           broker port (required)\n"
            "  --address A        node address (bench.q)\n"
            "  --count N          messages (send/recv/pair/fanout) or measured round trips (latency) (10000)\n"
            "  --size S           body bytes, one data section (1024)\n"
            "  --window W         max unsettled sent / receiver credit window (1000)\n"
            "  --durable          set header.durable=true on every message\n"
            "  --cap queue|topic  terminus capability symbol on target (sender) and source (receiver)\n"
            "  --terminus-durable none|configuration|deliveries   terminus durability (none)\n"
            "  --receivers K      fanout receivers, one connection each (10); subscribe: subscriptions (1)\n"
            "  --warmup M         latency round trips not measured (1000)\n"
            "  --sasl anonymous|plain|none   (anonymous)\n"
            "  --user U --password P         for --sasl plain\n"
            "  --timeout SECONDS  deadline for the whole run (600)\n"
            "  --container ID     container-id prefix (loadgen-<pid>)\n"
            "  --client-id ID     exact container-id of the (single) connection, e.g. a JMS ClientID\n"
            "  --sub NAME         receiver link named NAME with a JMS durable-subscription source (durable=2,\n"
            "                     expiry never, distribution copy); subscribe mode: --receivers K links\n"
            "                     (K>1: NAME.i on ADDRESS.i), no credit, exit once all are attached\n"
            "  --publisher-id ID  message annotations x-opt-publisher-id=ID, x-opt-publisher-seq=ulong on every\n"
            "                     message sent: --seq-start + its index (duplicate detection, bookmarks)\n"
            "  --seq-start N      x-opt-publisher-seq of the first message (1)\n"
            "  --bookmark VALUE   receiver source filter subgate-bookmark = described(subgate:bookmark:string,\n"
            "                     VALUE): 0 = EPOCH, 0|1| = NOW, publisherId|seq| ... (use with --cap topic)\n");
    exit(EXIT_USAGE);
}

static long parse_long(const char *s, long min) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end != 0 || v < min) {
        fprintf(stderr, "loadgen: bad number: %s\n", s);
        exit(EXIT_USAGE);
    }
    return v;
}

static void parse_args(int argc, char **argv) {
    if (argc < 2) usage();
    int m;
    for (m = 0; m < NMODES; m++)
        if (strcmp(argv[1], mode_names[m]) == 0) break;
    if (m == NMODES) usage();
    A.mode = (enum mode)m;
    A.host = "127.0.0.1";
    A.port = NULL;
    A.address = "bench.q";
    A.count = 10000;
    A.size = 1024;
    A.window = 1000;
    A.receivers = 0; /* 0: the mode's default (fanout 10, subscribe 1) */
    A.warmup = 1000;
    A.sasl = "anonymous";
    A.user = "guest";
    A.password = "guest";
    A.timeout_s = 600;
    A.seq_start = 1;
    static char cid[64];
    snprintf(cid, sizeof cid, "loadgen-%d", (int)getpid());
    A.container = cid;

    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (strcmp(a, name) == 0 && (v || (usage(), 0)) && ++i)
        if (strcmp(a, "--durable") == 0)
            A.durable = true;
        else if (OPT("--host"))
            A.host = v;
        else if (OPT("--port"))
            A.port = v;
        else if (OPT("--address"))
            A.address = v;
        else if (OPT("--count"))
            A.count = parse_long(v, 1);
        else if (OPT("--size"))
            A.size = (int)parse_long(v, 0);
        else if (OPT("--window"))
            A.window = (int)parse_long(v, 1);
        else if (OPT("--receivers"))
            A.receivers = (int)parse_long(v, 1);
        else if (OPT("--warmup"))
            A.warmup = parse_long(v, 0);
        else if (OPT("--cap"))
            A.cap = (strcmp(v, "none") == 0 || *v == 0) ? NULL : v;
        else if (OPT("--terminus-durable")) {
            if (strcmp(v, "none") == 0 || strcmp(v, "0") == 0)
                A.terminus_durability = PN_NONDURABLE;
            else if (strcmp(v, "configuration") == 0 || strcmp(v, "1") == 0)
                A.terminus_durability = PN_CONFIGURATION;
            else if (strcmp(v, "deliveries") == 0 || strcmp(v, "2") == 0)
                A.terminus_durability = PN_DELIVERIES;
            else
                usage();
        } else if (OPT("--sasl"))
            A.sasl = v;
        else if (OPT("--user"))
            A.user = v;
        else if (OPT("--password"))
            A.password = v;
        else if (OPT("--timeout"))
            A.timeout_s = (double)parse_long(v, 1);
        else if (OPT("--container"))
            A.container = v;
        else if (OPT("--client-id"))
            A.client_id = v;
        else if (OPT("--sub"))
            A.sub = v;
        else if (OPT("--publisher-id"))
            A.publisher_id = v;
        else if (OPT("--seq-start"))
            A.seq_start = (uint64_t)parse_long(v, 0);
        else if (OPT("--bookmark"))
            A.bookmark = v;
        else {
            fprintf(stderr, "loadgen: unknown option %s\n", a);
            usage();
        }
#undef OPT
    }
    if (!A.port) usage();
    if (A.receivers == 0) A.receivers = A.mode == M_SUBSCRIBE ? 1 : 10;
    if (A.mode == M_SUBSCRIBE && !A.sub) {
        fprintf(stderr, "loadgen: subscribe needs --sub NAME\n");
        exit(EXIT_USAGE);
    }
    if (A.publisher_id && (*A.publisher_id == 0 || strlen(A.publisher_id) > 512)) {
        fprintf(stderr, "loadgen: --publisher-id must have 1..512 characters\n");
        exit(EXIT_USAGE);
    }
    if (strcmp(A.sasl, "anonymous") && strcmp(A.sasl, "plain") && strcmp(A.sasl, "none")) usage();
    if (A.mode == M_FANOUT && A.receivers + 1 > MAX_CONNS) {
        fprintf(stderr, "loadgen: at most %d receivers\n", MAX_CONNS - 1);
        exit(EXIT_USAGE);
    }
}

static endpoint_t *add_endpoint(bool sender, bool receiver, long recv_target) {
    endpoint_t *ep = &A.eps[A.neps];
    ep->index = A.neps++;
    ep->want_sender = sender;
    ep->want_receiver = receiver;
    ep->recv_target = recv_target;
    ep->conn = pn_connection();
    pn_connection_set_context(ep->conn, ep);
    if (sender) A.sender_ep = ep;
    return ep;
}

static void connect_endpoint(endpoint_t *ep) {
    char addr[PN_MAX_ADDR];
    pn_proactor_addr(addr, sizeof addr, A.host, A.port);
    pn_transport_t *t = pn_transport();
    if (strcmp(A.sasl, "none") != 0) {
        pn_sasl_t *s = pn_sasl(t);
        if (strcmp(A.sasl, "plain") == 0) {
            pn_sasl_allowed_mechs(s, "PLAIN");
            pn_sasl_set_allow_insecure_mechs(s, true);
            pn_connection_set_user(ep->conn, A.user);
            pn_connection_set_password(ep->conn, A.password);
        } else {
            pn_sasl_allowed_mechs(s, "ANONYMOUS");
        }
    }
    pn_proactor_connect2(A.proactor, ep->conn, t, addr);
}

int main(int argc, char **argv) {
    parse_args(argc, argv);
    encode_message();
    A.proactor = pn_proactor();

    switch (A.mode) {
    case M_SEND:
        add_endpoint(true, false, 0);
        break;
    case M_RECV:
        add_endpoint(false, true, A.count);
        break;
    case M_PAIR:
        add_endpoint(false, true, A.count);
        add_endpoint(true, false, 0);
        break;
    case M_FANOUT:
        for (int i = 0; i < A.receivers; i++) add_endpoint(false, true, A.count);
        add_endpoint(true, false, 0);
        break;
    case M_SUBSCRIBE:
        add_endpoint(false, false, 0);
        break;
    case M_LATENCY:
        add_endpoint(true, true, A.warmup + A.count);
        A.samples = calloc((size_t)A.count, sizeof(double));
        break;
    }
    A.t_start = now_s();
    for (int i = 0; i < A.neps; i++) connect_endpoint(&A.eps[i]);
    pn_proactor_set_timeout(A.proactor, (pn_millis_t)(A.timeout_s * 1000));

    bool running = true;
    while (running) {
        pn_event_batch_t *batch = pn_proactor_wait(A.proactor);
        pn_event_t *e;
        while (running && (e = pn_event_batch_next(batch)) != NULL) running = handle(e);
        pn_proactor_done(A.proactor, batch);
    }
    if (A.exit_code == 0) {
        bool complete = (A.mode == M_LATENCY) ? A.rounds_done == A.warmup + A.count : true;
        if (A.mode == M_SEND || A.mode == M_PAIR || A.mode == M_FANOUT) complete = complete && A.accepted == A.count;
        if (A.mode == M_RECV || A.mode == M_PAIR) complete = complete && A.received_total == A.count;
        if (A.mode == M_FANOUT) complete = complete && A.received_total == A.count * A.receivers;
        if (A.mode == M_SUBSCRIBE) complete = A.receivers_open == A.receivers;
        if (!complete) {
            A.exit_code = EXIT_PROTOCOL;
            snprintf(A.error, sizeof A.error, "connections ended before the run was complete");
        }
    }
    print_result();
    if (A.exit_code) fprintf(stderr, "loadgen %s: %s\n", mode_names[A.mode], A.error);
    pn_proactor_free(A.proactor);
    free(A.msg);
    free(A.samples);
    return A.exit_code;
}
