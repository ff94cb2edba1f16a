#!/usr/bin/env node
// Command-line AMQP 1.0 client built on rhea, used by subgate's interop tests.
//
//   node rhea_client.js send       --url amqp://[user:pass@]127.0.0.1:PORT --address A [options]
//   node rhea_client.js receive    --url ... --address A [options]
//   node rhea_client.js sasl-check --url ...
//
// Every line written to stdout is one JSON object. On failure the last line is
// {"error": {"condition": ..., "description": ..., "stage": ...}} and the exit
// status is 1 (2 for bad command-line usage). Run with --help for all options.
'use strict';

const fs = require('fs');
const rhea = require('rhea');

const USAGE = `usage: rhea_client.js <send|receive|sasl-check> [options]

common:
  --url amqp://[user:pass@]HOST:PORT   server (SASL PLAIN with credentials, ANONYMOUS without)
  --no-sasl                            skip the SASL layer entirely
  --timeout SECONDS                    overall time limit (default 20)
  --container-id ID                    AMQP container id of this client
  --ca FILE                            (amqps) trust only this CA's PEM and check the server's certificate
  --cert FILE --key FILE               (amqps) present this client certificate
  --sasl-external                      (amqps, with --cert) authenticate with SASL EXTERNAL
send:
  --address A | --anonymous --to ADDR  target address, or anonymous relay (null target, 'to' per message)
  --capability queue|topic             target capability (repeatable, or comma-separated)
  --count N                            messages to send (default 1)
  --body TEXT                          body (amqp-value string); "{i}" is replaced by the index (default "message {i}")
  --durable --ttl MS --to ADDR --subject S
  --group-id G --group-modulo M          group-id G + (i mod M) per message (JMSXGroupID)
  --priorities P0,P1,...               header priority of message i (JMSPriority)
  --property KEY=VALUE                 application property (repeatable; VALUE parsed as JSON if possible)
  --annotation KEY=VALUE               message annotation (repeatable; same parsing)
  --settled                            send pre-settled (no outcomes)
  --link-name NAME
receive:
  --address A  --capability queue|topic  --count N (default 1)  --credit C (default count)
  --outcome accept|reject|release|modify-failed|modify-undeliverable|none   (default accept)
  --drain-after-ms T                   after T ms request a drain and stop when it completes
  --link-name NAME  --selector EXPR  --durable-subscription  --detach (detach instead of closing)
  --bookmark VALUE                     subgate's replay filter (0, 0|1|, YYYYmmddTHHMMSS, a bookmark or a list)
`;

// ---------------------------------------------------------------- output
let finished = false;

function emit(obj) {
    process.stdout.write(JSON.stringify(obj) + '\n');
}

function plain(v) {
    if (v === undefined || v === null) return null;
    if (Buffer.isBuffer(v)) return {'$binary': v.toString('base64')};
    if (typeof v === 'bigint') return v.toString();
    if (v instanceof Date) return v.toISOString();
    if (Array.isArray(v)) return v.map(plain);
    if (typeof v === 'object') {
        if (v.typecode !== undefined && v.content !== undefined) return plain(v.content); // body Section
        if (v.value !== undefined && v.descriptor !== undefined) return {descriptor: plain(v.descriptor), value: plain(v.value)};
        const out = {};
        for (const k of Object.keys(v)) {
            if (typeof v[k] !== 'function') out[k] = plain(v[k]);
        }
        return out;
    }
    return v;
}

function condition_of(err) {
    if (!err) return {condition: 'unknown', description: 'no error information'};
    const condition = err.condition || err.code || err.name || 'error';
    const description = err.description || err.message || String(err);
    return {condition: String(condition), description: String(description)};
}

function finish(code, extra) {
    if (finished) return;
    finished = true;
    if (extra) emit(extra);
    process.exitCode = code;
    // Flush stdout (synchronous for pipes and files on Linux) and leave promptly.
    setImmediate(() => process.exit(code));
}

function fail(stage, err, extra) {
    const error = Object.assign(condition_of(err), {stage: stage}, extra || {});
    finish(1, {error: error});
}

function usage(message) {
    process.stderr.write(USAGE);
    finish(2, {error: {condition: 'usage', description: message, stage: 'usage'}});
}

// ------------------------------------------------------------- arguments
const FLAGS = new Set(['durable', 'anonymous', 'settled', 'no-sasl', 'detach', 'durable-subscription', 'help',
                       'sasl-external']);
const REPEATABLE = new Set(['capability', 'property', 'annotation']);

function parse_args(argv) {
    const opts = {_: []};
    for (const k of REPEATABLE) opts[k] = [];
    for (let i = 0; i < argv.length; i++) {
        const arg = argv[i];
        if (!arg.startsWith('--')) { opts._.push(arg); continue; }
        let name = arg.slice(2);
        let value;
        const eq = name.indexOf('=');
        if (eq >= 0) { value = name.slice(eq + 1); name = name.slice(0, eq); }
        if (FLAGS.has(name)) { opts[name] = true; continue; }
        if (value === undefined) {
            if (i + 1 >= argv.length) throw new Error('missing value for --' + name);
            value = argv[++i];
        }
        if (REPEATABLE.has(name)) opts[name].push(value);
        else opts[name] = value;
    }
    return opts;
}

function int_opt(opts, name, dflt, min) {
    if (opts[name] === undefined) return dflt;
    const n = Number(opts[name]);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer >= ${min}`);
    return n;
}

function kv_list(list, name) {
    const out = {};
    for (const item of list) {
        const eq = item.indexOf('=');
        if (eq <= 0) throw new Error(`--${name} expects KEY=VALUE, got ${JSON.stringify(item)}`);
        const raw = item.slice(eq + 1);
        let value;
        try { value = JSON.parse(raw); } catch (e) { value = raw; }
        out[item.slice(0, eq)] = value;
    }
    return out;
}

function capabilities(opts) {
    const caps = [];
    for (const c of opts.capability) for (const part of c.split(',')) if (part) caps.push(part);
    return caps;
}

function connection_options(opts) {
    if (!opts.url) throw new Error('--url is required');
    let u;
    try { u = new URL(opts.url); } catch (e) { throw new Error('invalid --url ' + JSON.stringify(opts.url)); }
    if (u.protocol !== 'amqp:' && u.protocol !== 'amqps:') throw new Error('--url must start with amqp:// or amqps://');
    const host = u.hostname.replace(/^\[|\]$/g, '');
    const o = {
        host: host,
        hostname: host,
        port: u.port ? Number(u.port) : (u.protocol === 'amqps:' ? 5671 : 5672),
        reconnect: false,
        idle_time_out: 0,
    };
    if (u.protocol === 'amqps:') {
        o.transport = 'tls';
        o.rejectUnauthorized = Boolean(opts.ca);
        if (opts.ca) { o.ca = [fs.readFileSync(opts.ca)]; o.servername = 'localhost'; }
        if (opts.cert) { o.cert = fs.readFileSync(opts.cert); o.key = fs.readFileSync(opts.key); }
    }
    if (opts['sasl-external']) {
        o.enable_sasl_external = true; // rhea offers only EXTERNAL when no username is given
    } else if (opts['no-sasl']) {
        // rhea only adds a SASL layer when a username is given
    } else if (u.username) {
        o.username = decodeURIComponent(u.username);
        if (u.password) o.password = decodeURIComponent(u.password);
        // a username without a password makes rhea use ANONYMOUS with that trace name
    } else {
        o.username = 'anonymous'; // no password: rhea uses SASL ANONYMOUS
    }
    return o;
}

// ---------------------------------------------------------- connection
function connect(opts, on_open) {
    const container = rhea.create_container({id: opts['container-id'] || ('rhea-client-' + process.pid)});
    const conn_opts = connection_options(opts);
    let opened = false;

    container.on('error', (err) => { if (!finished) fail(opened ? 'link' : 'connect', err); });
    container.on('connection_open', (ctx) => { opened = true; on_open(ctx.connection, ctx); });
    container.on('connection_error', (ctx) => {
        if (finished) return;
        const err = ctx.error || ctx.connection.error || ctx.connection.get_error();
        fail(opened ? 'connection' : 'open', err);
    });
    container.on('connection_close', (ctx) => {
        if (finished) return;
        const err = ctx.error || ctx.connection.get_error();
        if (err) fail(opened ? 'connection' : 'open', err);
        else fail('connection', {condition: 'connection-closed', description: 'connection closed by peer'});
    });
    container.on('session_error', (ctx) => {
        if (!finished) fail('session', ctx.session.error || (ctx.session.remote.end && ctx.session.remote.end.error));
    });
    container.on('disconnected', (ctx) => {
        if (finished) return;
        fail(opened ? 'connection' : 'connect', ctx.error || {condition: 'disconnected', description: 'transport closed'});
    });
    container.on('protocol_error', (err) => { if (!finished) fail('protocol', err); });
    return container.connect(conn_opts);
}

// Close everything politely, then exit with `code` (bounded by a grace timer).
function close_and_exit(conn, code, extra) {
    if (finished) return;
    finished = true;
    if (extra) emit(extra);
    process.exitCode = code;
    const done = () => setImmediate(() => process.exit(code));
    const grace = setTimeout(done, 2000);
    grace.unref();
    conn.on('connection_close', done);
    conn.on('disconnected', done);
    try { conn.close(); } catch (e) { done(); }
}

// A refused attach is answered with a null terminus (or one without the requested address)
// followed by a detach carrying the error: report that as stage "attach".
function link_failure(link, default_condition, requested_address) {
    const err = link.error || (link.remote.detach && link.remote.detach.error);
    const attach = link.remote.attach;
    const terminus = attach ? (link.is_sender() ? attach.target : attach.source) : undefined;
    const refused = !attach || !terminus || (requested_address && !terminus.address);
    return {
        stage: refused ? 'attach' : 'link',
        err: err || {condition: default_condition, description: 'link closed by peer without an error'},
    };
}

// ----------------------------------------------------------------- send
function cmd_send(opts) {
    const count = int_opt(opts, 'count', 1, 0);
    const anonymous = Boolean(opts.anonymous);
    if (!anonymous && !opts.address) throw new Error('send needs --address (or --anonymous --to ADDR)');
    if (anonymous && !opts.to) throw new Error('--anonymous needs --to ADDR');
    const ttl = opts.ttl === undefined ? undefined : int_opt(opts, 'ttl', 0, 0);
    const properties = kv_list(opts.property, 'property');
    const annotations = kv_list(opts.annotation, 'annotation');
    const body_template = opts.body === undefined ? 'message {i}' : opts.body;
    const caps = capabilities(opts);
    const settled = Boolean(opts.settled);

    const summary = {sent: 0, accepted: 0, rejected: 0, released: 0, modified: 0, presettled: 0};
    let outcomes = 0;

    connect(opts, (conn) => {
        const target = anonymous ? {} : {address: opts.address};
        if (caps.length) target.capabilities = caps;
        const link_opts = {target: target, snd_settle_mode: settled ? 1 : 0, autosettle: true};
        if (opts['link-name']) link_opts.name = opts['link-name'];
        const sender = conn.open_sender(link_opts);

        const check_done = () => {
            if (outcomes >= count && summary.sent >= count) close_and_exit(conn, 0, {summary: summary});
        };
        const report = (ctx, outcome, extra) => {
            const d = ctx.delivery;
            if (d.__reported) return;
            d.__reported = true;
            outcomes++;
            summary[outcome] = (summary[outcome] || 0) + 1;
            emit(Object.assign({event: 'outcome', index: d.__index, outcome: outcome}, extra || {}));
            check_done();
        };

        sender.on('sendable', () => {
            while (!finished && sender.sendable() && summary.sent < count) {
                const i = summary.sent;
                const msg = {
                    body: body_template.split('{i}').join(String(i)),
                    message_id: `${process.pid}-${i}`,
                };
                if (opts.durable) msg.durable = true;
                if (ttl !== undefined) msg.ttl = ttl;
                if (opts.to) msg.to = opts.to;
                if (opts.subject) msg.subject = opts.subject;
                if (opts.priorities) msg.priority = Number(opts.priorities.split(',')[i]);
                if (opts['group-id']) msg.group_id = opts['group-id'] + (opts['group-modulo'] ? String(i % Number(opts['group-modulo'])) : '');
                if (Object.keys(properties).length) msg.application_properties = properties;
                if (Object.keys(annotations).length) msg.message_annotations = annotations;
                const d = sender.send(msg);
                d.__index = i;
                summary.sent++;
                if (settled) {
                    d.__reported = true;
                    outcomes++;
                    summary.presettled++;
                    emit({event: 'outcome', index: i, outcome: 'presettled'});
                }
            }
            check_done();
        });
        sender.on('accepted', (ctx) => report(ctx, 'accepted'));
        sender.on('rejected', (ctx) => {
            const st = ctx.delivery.remote_state || {};
            report(ctx, 'rejected', st.error ? {error: condition_of(st.error)} : {});
        });
        sender.on('released', (ctx) => report(ctx, 'released'));
        sender.on('modified', (ctx) => {
            const st = ctx.delivery.remote_state || {};
            report(ctx, 'modified', {
                delivery_failed: Boolean(st.delivery_failed),
                undeliverable_here: Boolean(st.undeliverable_here),
            });
        });
        sender.on('settled', (ctx) => {
            if (!ctx.delivery.remote_state) report(ctx, 'settled');
        });
        sender.on('sender_error', (ctx) => {
            if (finished) return;
            const f = link_failure(ctx.sender, 'link-error', opts.address);
            fail(f.stage, f.err, {summary: summary});
        });
        sender.on('sender_close', (ctx) => {
            if (finished) return;
            const f = link_failure(ctx.sender, 'link-closed', opts.address);
            fail(f.stage, f.err, {summary: summary});
        });
        if (count === 0) close_and_exit(conn, 0, {summary: summary});
    });
    return () => ({summary: summary});
}

// -------------------------------------------------------------- receive
const OUTCOMES = ['accept', 'reject', 'release', 'modify-failed', 'modify-undeliverable', 'none'];

function message_json(m) {
    let body = m.body;
    let body_type = 'value';
    const extra = {};
    if (body && typeof body === 'object' && body.typecode === 0x75) {
        body_type = 'data';
        const chunks = body.multiple ? body.content : [body.content];
        const buf = Buffer.concat(chunks.map((c) => (Buffer.isBuffer(c) ? c : Buffer.from(c))));
        extra.body_base64 = buf.toString('base64');
        body = buf.toString('utf8');
    } else if (body && typeof body === 'object' && body.typecode === 0x76) {
        body_type = 'sequence';
        body = plain(body.content);
    } else if (Buffer.isBuffer(body)) {
        body_type = 'binary';
        extra.body_base64 = body.toString('base64');
        body = body.toString('utf8');
    } else {
        body = plain(body);
    }
    return Object.assign({
        body: body,
        body_type: body_type,
        delivery_count: m.delivery_count === undefined ? 0 : m.delivery_count,
        durable: Boolean(m.durable),
        ttl: m.ttl === undefined ? null : m.ttl,
        priority: m.priority === undefined ? null : m.priority,
        first_acquirer: Boolean(m.first_acquirer),
        message_annotations: plain(m.message_annotations) || {},
        application_properties: plain(m.application_properties) || {},
        to: plain(m.to),
        subject: plain(m.subject),
        message_id: plain(m.message_id),
        correlation_id: plain(m.correlation_id),
        reply_to: plain(m.reply_to),
        content_type: plain(m.content_type),
        group_id: plain(m.group_id),
        creation_time: plain(m.creation_time),
        absolute_expiry_time: plain(m.absolute_expiry_time),
    }, extra);
}

function cmd_receive(opts) {
    if (!opts.address) throw new Error('receive needs --address');
    const count = int_opt(opts, 'count', 1, 0);
    const credit = int_opt(opts, 'credit', Math.max(count, 1), 1);
    const outcome = opts.outcome || 'accept';
    if (!OUTCOMES.includes(outcome)) throw new Error('--outcome must be one of ' + OUTCOMES.join(', '));
    const drain_after = opts['drain-after-ms'] === undefined ? undefined : int_opt(opts, 'drain-after-ms', 0, 0);
    const caps = capabilities(opts);
    let received = 0;
    let issued = 0;
    let draining = false;

    connect(opts, (conn) => {
        const source = {address: opts.address};
        if (caps.length) source.capabilities = caps;
        if (opts['durable-subscription']) { source.durable = 2; source.expiry_policy = 'never'; }
        if (opts.selector) source.filter = rhea.filter.selector(opts.selector);
        if (opts.bookmark !== undefined) {
            // subgate's replay filter (design.md §3): described type with a symbolic descriptor.
            source.filter = Object.assign(source.filter || {}, {
                'subgate-bookmark': rhea.types.wrap_described(String(opts.bookmark), 'subgate:bookmark:string'),
            });
        }
        const link_opts = {source: source, credit_window: 0, autoaccept: false};
        if (opts['link-name']) link_opts.name = opts['link-name'];
        const receiver = conn.open_receiver(link_opts);

        const finish_ok = (extra) => {
            const summary = Object.assign({received: received}, extra || {});
            if (opts.detach) {
                try { receiver.detach(); } catch (e) { /* closing the connection detaches anyway */ }
            }
            close_and_exit(conn, 0, {summary: summary});
        };
        const grant = (n) => { if (n > 0) { issued += n; receiver.add_credit(n); } };

        receiver.on('receiver_open', () => {
            if (finished) return;
            if (drain_after !== undefined) {
                grant(credit);
                setTimeout(() => {
                    if (finished) return;
                    draining = true;
                    const outstanding = issued - received;
                    emit({event: 'drain_requested', received: received, outstanding_credit: outstanding});
                    receiver.drain_credit();
                    if (outstanding <= 0) {
                        // Nothing outstanding: the drain is trivially complete.
                        emit({event: 'drained', received: received, credit: 0, immediate: true});
                        finish_ok({drained: true});
                    }
                }, drain_after);
            } else if (count === 0) {
                finish_ok();
            } else {
                grant(Math.min(credit, count));
            }
        });
        receiver.on('message', (ctx) => {
            if (finished) return;
            const d = ctx.delivery;
            received++;
            const line = {event: 'message', index: received - 1, message: message_json(ctx.message), outcome: outcome};
            switch (outcome) {
                case 'accept': d.accept(); break;
                case 'reject': d.reject({condition: 'amqp:precondition-failed', description: 'rejected by rhea_client'}); break;
                case 'release': d.release(); break;
                case 'modify-failed': d.modified({delivery_failed: true}); break;
                case 'modify-undeliverable': d.modified({delivery_failed: true, undeliverable_here: true}); break;
                case 'none': break;
            }
            emit(line);
            if (drain_after !== undefined) return; // the drain decides when we stop
            if (received >= count) { finish_ok(); return; }
            if (issued - received <= 0) grant(Math.min(credit, count - received));
        });
        receiver.on('receiver_drained', () => {
            if (finished || !draining) return;
            emit({event: 'drained', received: received, credit: receiver.credit});
            finish_ok({drained: true});
        });
        receiver.on('receiver_error', (ctx) => {
            if (finished) return;
            const f = link_failure(ctx.receiver, 'link-error', opts.address);
            fail(f.stage, f.err, {received: received});
        });
        receiver.on('receiver_close', (ctx) => {
            if (finished) return;
            const f = link_failure(ctx.receiver, 'link-closed', opts.address);
            fail(f.stage, f.err, {received: received});
        });
    });
    return () => ({received: received, expected: count, draining: draining});
}

// ----------------------------------------------------------- sasl-check
function cmd_sasl_check(opts) {
    const container = rhea.create_container({id: opts['container-id'] || ('rhea-client-' + process.pid)});
    const conn_opts = connection_options(opts);
    const mechanism = opts['no-sasl'] ? 'none' : (conn_opts.password !== undefined ? 'PLAIN' : 'ANONYMOUS');
    let opened = false;
    const answer = (err) => {
        if (finished) return;
        const c = condition_of(err);
        if (!err || (!err.condition && err.code)) {
            // socket-level failure: no AMQP answer at all
            fail('connect', err || {condition: 'disconnected', description: 'transport closed before open'});
        } else {
            finish(0, {opened: false, mechanism: mechanism, error: c});
        }
    };
    container.on('error', (err) => answer(err));
    container.on('connection_open', (ctx) => {
        opened = true;
        const remote = ctx.connection.remote.open || {};
        const conn = ctx.connection;
        close_and_exit(conn, 0, {
            opened: true,
            mechanism: mechanism,
            remote_container_id: plain(remote.container_id),
            offered_capabilities: plain(remote.offered_capabilities) || [],
            properties: plain(remote.properties) || {},
        });
    });
    container.on('connection_error', (ctx) => answer(ctx.error || ctx.connection.get_error()));
    container.on('connection_close', (ctx) => {
        if (!opened) answer(ctx.error || ctx.connection.get_error() || {condition: 'connection-closed', description: 'closed before open'});
    });
    container.on('disconnected', (ctx) => answer(ctx.error));
    container.on('protocol_error', (err) => answer(err));
    container.connect(conn_opts);
    return () => ({opened: opened});
}

// ----------------------------------------------------------------- main
function main() {
    let opts;
    try {
        opts = parse_args(process.argv.slice(2));
    } catch (e) {
        return usage(e.message);
    }
    if (opts.help) { process.stdout.write(USAGE); return; }
    const command = opts._[0];
    const commands = {'send': cmd_send, 'receive': cmd_receive, 'sasl-check': cmd_sasl_check};
    if (!commands[command]) return usage('unknown or missing command ' + JSON.stringify(command || ''));
    let timeout;
    try {
        timeout = opts.timeout === undefined ? 20 : Number(opts.timeout);
        if (!(timeout > 0)) throw new Error('--timeout must be a positive number of seconds');
    } catch (e) {
        return usage(e.message);
    }
    let progress = () => ({});
    const timer = setTimeout(() => {
        fail('timeout', {condition: 'timeout', description: `no completion within ${timeout}s`}, {progress: progress()});
    }, timeout * 1000);
    try {
        progress = commands[command](opts);
    } catch (e) {
        return usage(e.message);
    }
}

process.on('uncaughtException', (err) => {
    process.stderr.write(String(err && err.stack || err) + '\n');
    if (!finished) fail('internal', {condition: 'internal-error', description: String(err && err.message || err)});
});

main();
