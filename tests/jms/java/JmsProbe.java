// The real-client probe of tests/jms: drives subgate with the Apache Qpid JMS 2.10 client.
//
//   java -cp 'LIB/*:CLASSES' JmsProbe URL PREFIX SCENARIO...
//
// URL goes to org.apache.qpid.jms.JmsConnectionFactory as given (client options in its query); the environment's
// JMS_USER / JMS_PASSWORD, when set, are the connection's credentials (the scenario "login:USER:PASSWORD[:MECH]"
// uses its own, and only SASL mechanism MECH when given: "login::" logs in anonymously). PREFIX keeps this run's destinations
// apart from other runs on the same server. Each scenario prints one JSON line to stdout:
//   {"scenario": NAME, "result": {...what it observed...}}   or   {"scenario": NAME, "error": "...", "trace": "..."}
// The probe only reports what the client saw; the pytest side (tests/jms/test_real_client.py) decides what is
// right. Every wait is bounded (receive timeouts, latches), so a broker that misbehaves ends in a result, not a
// hang.

import jakarta.jms.BytesMessage;
import jakarta.jms.CompletionListener;
import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.JMSConsumer;
import jakarta.jms.JMSContext;
import jakarta.jms.JMSException;
import jakarta.jms.JMSProducer;
import jakarta.jms.MapMessage;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.ObjectMessage;
import jakarta.jms.Queue;
import jakarta.jms.QueueBrowser;
import jakarta.jms.Session;
import jakarta.jms.StreamMessage;
import jakarta.jms.TemporaryQueue;
import jakarta.jms.TemporaryTopic;
import jakarta.jms.TextMessage;
import jakarta.jms.Topic;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Enumeration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.qpid.jms.JmsConnectionFactory;

public final class JmsProbe {
    static final long WAIT = 10_000; // ms: the longest wait for a message that should come
    static final long QUIET = 500; // ms: how long "nothing (more) comes" is watched

    final String url;
    final String prefix;

    JmsProbe(String url, String prefix) {
        this.url = url;
        this.prefix = prefix;
    }

    public static void main(String[] args) {
        if (args.length < 3) {
            System.err.println("usage: JmsProbe URL PREFIX SCENARIO...");
            System.exit(2);
        }
        JmsProbe probe = new JmsProbe(args[0], args[1]);
        for (int i = 2; i < args.length; i++) {
            Map<String, Object> line = new LinkedHashMap<>();
            line.put("scenario", args[i]);
            try {
                line.put("result", probe.run(args[i]));
            } catch (Throwable t) {
                line.put("error", t.getClass().getName() + ": " + t.getMessage());
                StringWriter trace = new StringWriter();
                t.printStackTrace(new PrintWriter(trace));
                line.put("trace", trace.toString());
            }
            System.out.println(Json.write(line));
            System.out.flush();
        }
        System.exit(0); // the client's threads are not daemons
    }

    Map<String, Object> run(String scenario) throws Exception {
        if (scenario.startsWith("login:")) {
            String[] parts = scenario.split(":", 4);
            String mechanism = parts.length > 3 ? parts[3] : null;
            return login(parts[1], parts.length > 2 ? parts[2] : "", mechanism);
        }
        switch (scenario) {
            case "roundtrip": return roundtrip();
            case "bodies": return bodies();
            case "receive-variants": return receiveVariants();
            case "receive-body": return receiveBody();
            case "listener": return listener();
            case "async-send": return asyncSend();
            case "durable": return durable();
            case "resubscribe-selector": return resubscribeSelector();
            case "shared-durable": return sharedDurable();
            case "shared-nondurable": return sharedNonDurable();
            case "global-shared": return globalShared();
            case "selectors": return selectors();
            case "no-local": return noLocal();
            case "temporary": return temporary();
            case "browser": return browser();
            case "transactions": return transactions();
            case "client-ack-recover": return clientAckRecover();
            case "ttl": return ttl();
            case "delay": return delay();
            case "priority": return priority();
            case "groups": return groups();
            case "durable-prepare": return durablePrepare();
            case "durable-drain": return durableDrain();
            case "login": return login(System.getenv("JMS_USER"), System.getenv("JMS_PASSWORD"), null);
            default: throw new IllegalArgumentException("no scenario " + scenario);
        }
    }

    // -- helpers --------------------------------------------------------------------------------------------

    JmsConnectionFactory factory() {
        return factory(System.getenv("JMS_USER"), System.getenv("JMS_PASSWORD"));
    }

    JmsConnectionFactory factory(String user, String password) {
        return factory(url, user, password);
    }

    static JmsConnectionFactory factory(String url, String user, String password) {
        JmsConnectionFactory factory = new JmsConnectionFactory(url);
        if (user != null && !user.isEmpty()) {
            factory.setUsername(user);
            factory.setPassword(password);
        }
        return factory;
    }

    Connection connect(String clientId) throws JMSException {
        JmsConnectionFactory factory = factory();
        if (clientId != null) factory.setClientID(clientId);
        Connection connection = factory.createConnection();
        connection.start();
        return connection;
    }

    String name(String what) {
        return prefix + "-" + what;
    }

    static String text(Message message) throws JMSException {
        return message == null ? null : ((TextMessage) message).getText();
    }

    /** Bodies of up to ``count`` messages, each within WAIT (fewer when one does not come). */
    static List<String> take(MessageConsumer consumer, int count) throws JMSException {
        List<String> bodies = new ArrayList<>();
        while (bodies.size() < count) {
            Message message = consumer.receive(WAIT);
            if (message == null) break;
            bodies.add(text(message));
        }
        return bodies;
    }

    /** ``count`` messages taken from several consumers together (within 2 x WAIT): each one's bodies. */
    static List<List<String>> takeFrom(int count, MessageConsumer... consumers) throws JMSException {
        List<List<String>> got = new ArrayList<>();
        for (int i = 0; i < consumers.length; i++) got.add(new ArrayList<>());
        long deadline = System.currentTimeMillis() + 2 * WAIT;
        int total = 0;
        while (total < count && System.currentTimeMillis() < deadline) {
            for (int i = 0; i < consumers.length && total < count; i++) {
                Message message = consumers[i].receive(50);
                if (message != null) {
                    got.get(i).add(text(message));
                    total++;
                }
            }
        }
        return got;
    }

    /** Bodies of the messages that come within QUIET each (none expected, usually). */
    static List<String> quiet(MessageConsumer consumer) throws JMSException {
        List<String> bodies = new ArrayList<>();
        Message message = consumer.receive(QUIET);
        while (message != null && bodies.size() < 10_000) {
            bodies.add(text(message));
            message = consumer.receive(QUIET);
        }
        return bodies;
    }

    static void send(Session session, jakarta.jms.Destination to, String... bodies) throws JMSException {
        MessageProducer producer = session.createProducer(to);
        for (String body : bodies) producer.send(session.createTextMessage(body));
        producer.close();
    }

    static Map<String, Object> result(Object... pairs) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (int i = 0; i < pairs.length; i += 2) out.put((String) pairs[i], pairs[i + 1]);
        return out;
    }

    static String kind(Message message) {
        if (message instanceof TextMessage) return "text";
        if (message instanceof BytesMessage) return "bytes";
        if (message instanceof MapMessage) return "map";
        if (message instanceof StreamMessage) return "stream";
        if (message instanceof ObjectMessage) return "object";
        return message == null ? null : "message";
    }

    // -- scenarios ------------------------------------------------------------------------------------------

    Map<String, Object> roundtrip() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue(name("roundtrip"));
            MessageConsumer consumer = session.createConsumer(queue);
            send(session, queue, "one", "two");
            return result("bodies", take(consumer, 2));
        }
    }

    /** The five body types, sent to a queue and read back with their contents. */
    Map<String, Object> bodies() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue(name("bodies"));
            MessageProducer producer = session.createProducer(queue);
            producer.send(session.createTextMessage("text \u00e9\u20ac"));
            BytesMessage bytes = session.createBytesMessage();
            bytes.writeBytes(new byte[] {1, 2, 3, (byte) 255});
            producer.send(bytes);
            MapMessage map = session.createMapMessage();
            map.setString("s", "v");
            map.setInt("i", 42);
            map.setBoolean("b", true);
            map.setDouble("d", 2.5);
            map.setBytes("x", new byte[] {9, 8});
            producer.send(map);
            StreamMessage stream = session.createStreamMessage();
            stream.writeString("a");
            stream.writeInt(7);
            stream.writeBoolean(false);
            producer.send(stream);
            producer.send(session.createObjectMessage(new ArrayList<>(List.of("x", 1, 2.5))));
            MessageConsumer consumer = session.createConsumer(queue);
            List<String> kinds = new ArrayList<>();
            Map<String, Object> out = new LinkedHashMap<>();
            for (int i = 0; i < 5; i++) {
                Message message = consumer.receive(WAIT);
                kinds.add(kind(message));
                if (message instanceof TextMessage) {
                    out.put("text", ((TextMessage) message).getText());
                } else if (message instanceof BytesMessage) {
                    BytesMessage b = (BytesMessage) message;
                    byte[] read = new byte[(int) b.getBodyLength()];
                    b.readBytes(read);
                    out.put("bytes", read);
                } else if (message instanceof MapMessage) {
                    MapMessage m = (MapMessage) message;
                    Map<String, Object> values = new TreeMap<>();
                    for (Enumeration<?> e = m.getMapNames(); e.hasMoreElements(); ) {
                        String key = (String) e.nextElement();
                        values.put(key, m.getObject(key));
                    }
                    out.put("map", values);
                } else if (message instanceof StreamMessage) {
                    StreamMessage s = (StreamMessage) message;
                    out.put("stream", List.of(s.readString(), s.readInt(), s.readBoolean()));
                } else if (message instanceof ObjectMessage) {
                    out.put("object", ((ObjectMessage) message).getObject());
                }
            }
            out.put("kinds", kinds);
            out.put("more", quiet(consumer));
            return out;
        }
    }

    /** receive(timeout) and receiveNoWait on an empty queue and on a queue with a message. */
    Map<String, Object> receiveVariants() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue(name("receive"));
            MessageConsumer consumer = session.createConsumer(queue);
            Message timedOut = consumer.receive(QUIET);
            Message noWaitEmpty = consumer.receiveNoWait();
            send(session, queue, "for-timeout", "for-nowait");
            String timed = text(consumer.receive(WAIT));
            String noWait = null;
            int polls = 0;
            while (noWait == null && polls < 200) { // the message may still be on its way: bounded polling
                noWait = text(consumer.receiveNoWait());
                if (noWait == null) Thread.sleep(50);
                polls++;
            }
            return result("timeout_empty", timedOut == null, "nowait_empty", noWaitEmpty == null,
                "timed", timed, "nowait", noWait, "more", quiet(consumer));
        }
    }

    /** JMSContext's JMSConsumer.receiveBody for String, byte[] and Map, a wrong type, and receiveBodyNoWait. */
    Map<String, Object> receiveBody() throws Exception {
        try (JMSContext context = factory().createContext()) {
            Queue queue = context.createQueue(name("receive-body"));
            JMSConsumer consumer = context.createConsumer(queue);
            JMSProducer producer = context.createProducer();
            producer.send(queue, "body-text");
            String text = consumer.receiveBody(String.class, WAIT);
            producer.send(queue, new byte[] {5, 6, 7});
            byte[] bytes = consumer.receiveBody(byte[].class, WAIT);
            producer.send(queue, Map.of("k", 1));
            Map<?, ?> map = consumer.receiveBody(Map.class, WAIT);
            producer.send(queue, "wrong-type");
            String wrong = null;
            try {
                consumer.receiveBody(byte[].class, WAIT);
                wrong = "no exception";
            } catch (jakarta.jms.MessageFormatRuntimeException expected) {
                wrong = "MessageFormatRuntimeException";
            }
            String after = consumer.receiveBody(String.class, WAIT); // the message stays after the wrong type
            String noWait = null;
            producer.send(queue, "nowait-body");
            for (int polls = 0; noWait == null && polls < 200; polls++) {
                noWait = consumer.receiveBodyNoWait(String.class);
                if (noWait == null) Thread.sleep(50);
            }
            return result("text", text, "bytes", bytes, "map", map, "wrong_type", wrong, "after_wrong_type", after,
                "nowait", noWait, "empty", consumer.receiveBody(String.class, QUIET));
        }
    }

    Map<String, Object> listener() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue(name("listener"));
            MessageConsumer consumer = session.createConsumer(queue);
            List<String> got = Collections.synchronizedList(new ArrayList<>());
            CountDownLatch latch = new CountDownLatch(5);
            consumer.setMessageListener(message -> {
                try {
                    got.add(text(message));
                } catch (JMSException e) {
                    got.add("error: " + e);
                }
                latch.countDown();
            });
            Session sending = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            send(sending, queue, "l0", "l1", "l2", "l3", "l4");
            boolean all = latch.await(WAIT * 2, TimeUnit.MILLISECONDS);
            consumer.close();
            return result("all_within_wait", all, "bodies", new ArrayList<>(got));
        }
    }

    /** JMS 2 asynchronous send: each send's CompletionListener is told once the broker has settled it. */
    Map<String, Object> asyncSend() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue(name("async"));
            MessageProducer producer = session.createProducer(queue);
            List<String> completed = Collections.synchronizedList(new ArrayList<>());
            List<String> failed = Collections.synchronizedList(new ArrayList<>());
            CountDownLatch latch = new CountDownLatch(3);
            for (int i = 0; i < 3; i++) {
                producer.send(session.createTextMessage("a" + i), new CompletionListener() {
                    @Override
                    public void onCompletion(Message message) {
                        try {
                            completed.add(text(message));
                        } catch (JMSException e) {
                            failed.add(e.toString());
                        }
                        latch.countDown();
                    }

                    @Override
                    public void onException(Message message, Exception exception) {
                        failed.add(exception.toString());
                        latch.countDown();
                    }
                });
            }
            boolean all = latch.await(WAIT * 2, TimeUnit.MILLISECONDS);
            List<String> done = new ArrayList<>(completed);
            Collections.sort(done);
            return result("all_within_wait", all, "completed", done, "failed", new ArrayList<>(failed),
                "received", take(session.createConsumer(queue), 3));
        }
    }

    /** A non-shared durable subscription with a client-id: kept while no consumer is attached, then removed. */
    Map<String, Object> durable() throws Exception {
        String clientId = name("cid");
        try (Connection connection = connect(clientId)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = session.createTopic(name("durable-topic"));
            MessageConsumer first = session.createDurableSubscriber(topic, "sub");
            send(session, topic, "d0");
            List<String> live = take(first, 1);
            first.close();
            send(session, topic, "d1", "d2", "d3"); // while the subscription has no consumer
            MessageConsumer again = session.createDurableConsumer(topic, "sub");
            List<String> kept = take(again, 3);
            again.close();
            session.unsubscribe("sub");
            send(session, topic, "d4"); // no subscription now: nobody keeps it
            MessageConsumer fresh = session.createDurableConsumer(topic, "sub");
            List<String> afterUnsubscribe = quiet(fresh);
            String unsubscribeWhileActive;
            try {
                session.unsubscribe("sub");
                unsubscribeWhileActive = "no exception";
            } catch (JMSException expected) {
                unsubscribeWhileActive = expected.getClass().getSimpleName();
            }
            fresh.close();
            session.unsubscribe("sub");
            return result("live", live, "kept", kept, "after_unsubscribe", afterUnsubscribe,
                "unsubscribe_while_active", unsubscribeWhileActive);
        }
    }

    /** Re-creating a durable subscription with another selector replaces it (JMS 2 §8.3.2). */
    Map<String, Object> resubscribeSelector() throws Exception {
        try (Connection connection = connect(name("cid-sel"))) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = session.createTopic(name("resub-topic"));
            session.createDurableSubscriber(topic, "sub", "n = 1", false).close();
            MessageProducer producer = session.createProducer(topic);
            for (int n = 1; n <= 2; n++) {
                TextMessage message = session.createTextMessage("old-n" + n);
                message.setIntProperty("n", n);
                producer.send(message);
            }
            MessageConsumer changed = session.createDurableSubscriber(topic, "sub", "n = 2", false);
            for (int n = 1; n <= 2; n++) {
                TextMessage message = session.createTextMessage("new-n" + n);
                message.setIntProperty("n", n);
                producer.send(message);
            }
            List<String> got = take(changed, 1); // the first to come: old-n1 (kept) or new-n2
            changed.close();
            MessageConsumer same = session.createDurableSubscriber(topic, "sub", "n = 2", false);
            TextMessage message = session.createTextMessage("same-n2");
            message.setIntProperty("n", 2);
            producer.send(message);
            List<String> sameSelector = take(same, 1);
            same.close();
            session.unsubscribe("sub");
            return result("changed_selector", got, "same_selector", sameSelector);
        }
    }

    static List<String> sorted(List<String> a, List<String> b) {
        List<String> all = new ArrayList<>(a);
        all.addAll(b);
        Collections.sort(all);
        return all;
    }

    /** A shared durable subscription (client-id set): two consumers share it; it outlives them. */
    Map<String, Object> sharedDurable() throws Exception {
        try (Connection connection = connect(name("cid-shared"))) {
            Session one = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Session two = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = one.createTopic(name("shared-durable-topic"));
            MessageConsumer a = one.createSharedDurableConsumer(topic, "sd");
            MessageConsumer b = two.createSharedDurableConsumer(topic, "sd");
            send(one, topic, "s0", "s1", "s2", "s3", "s4", "s5");
            List<List<String>> got = takeFrom(6, a, b);
            a.close();
            b.close();
            send(one, topic, "s6", "s7"); // kept for the subscription while it has no consumer
            MessageConsumer again = two.createSharedDurableConsumer(topic, "sd");
            List<String> kept = take(again, 2);
            again.close();
            one.unsubscribe("sd");
            return result("shared", sorted(got.get(0), got.get(1)), "kept", kept);
        }
    }

    /** A shared non-durable subscription: shared by two consumers, gone with the last of them. */
    Map<String, Object> sharedNonDurable() throws Exception {
        try (Connection connection = connect(name("cid-sn"))) {
            Session one = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Session two = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = one.createTopic(name("shared-topic"));
            MessageConsumer a = one.createSharedConsumer(topic, "sn");
            MessageConsumer b = two.createSharedConsumer(topic, "sn");
            send(one, topic, "n0", "n1", "n2", "n3");
            List<List<String>> got = takeFrom(4, a, b);
            a.close();
            b.close();
            send(one, topic, "n4");
            MessageConsumer again = one.createSharedConsumer(topic, "sn");
            List<String> afterLast = quiet(again);
            again.close();
            return result("shared", sorted(got.get(0), got.get(1)), "after_last_left", afterLast);
        }
    }

    /** A global shared durable subscription (no client-id) used from two connections, then unsubscribed. */
    Map<String, Object> globalShared() throws Exception {
        try (Connection first = connect(null); Connection second = connect(null)) {
            Session one = first.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Session two = second.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = one.createTopic(name("global-topic"));
            MessageConsumer a = one.createSharedDurableConsumer(topic, "gd");
            MessageConsumer b = two.createSharedDurableConsumer(topic, "gd");
            send(one, topic, "g0", "g1", "g2", "g3");
            List<List<String>> got = takeFrom(4, a, b);
            a.close();
            b.close();
            send(one, topic, "g4");
            MessageConsumer again = two.createSharedDurableConsumer(topic, "gd");
            List<String> kept = take(again, 1);
            again.close();
            two.unsubscribe("gd");
            send(one, topic, "g5");
            MessageConsumer fresh = one.createSharedDurableConsumer(topic, "gd");
            List<String> afterUnsubscribe = quiet(fresh);
            fresh.close();
            one.unsubscribe("gd");
            return result("shared", sorted(got.get(0), got.get(1)), "kept", kept, "after_unsubscribe", afterUnsubscribe);
        }
    }

    /** Selectors on a queue consumer (the rest stays, in order) and on a topic subscriber. */
    Map<String, Object> selectors() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue(name("selectors"));
            Topic topic = session.createTopic(name("selectors-topic"));
            MessageConsumer topicSelected = session.createConsumer(topic, "size > 3 OR color LIKE 'gr%'");
            MessageProducer toQueue = session.createProducer(queue);
            MessageProducer toTopic = session.createProducer(topic);
            String[] colors = {"red", "blue", "red", "green", "red", "blue"};
            for (int i = 0; i < colors.length; i++) {
                TextMessage message = session.createTextMessage("m" + i + "-" + colors[i]);
                message.setStringProperty("color", colors[i]);
                message.setIntProperty("size", i);
                toQueue.send(message);
                toTopic.send(message);
            }
            MessageConsumer selected = session.createConsumer(queue, "color = 'red' AND size > 1");
            List<String> red = take(selected, 2);
            red.addAll(quiet(selected));
            selected.close();
            MessageConsumer rest = session.createConsumer(queue);
            return result("queue_selected", red, "queue_rest", take(rest, 4), "topic_selected", take(topicSelected, 3));
        }
    }

    /** noLocal: a subscriber does not get what its own connection publishes. */
    Map<String, Object> noLocal() throws Exception {
        try (Connection mine = connect(name("cid-local")); Connection other = connect(null)) {
            Session session = mine.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = session.createTopic(name("nolocal-topic"));
            MessageConsumer noLocal = session.createConsumer(topic, null, true);
            MessageConsumer all = session.createConsumer(topic);
            MessageConsumer durableNoLocal = session.createDurableSubscriber(topic, "dnl", null, true);
            send(session, topic, "from-mine");
            send(other.createSession(false, Session.AUTO_ACKNOWLEDGE), topic, "from-other");
            // from-mine was sent first: were it delivered, it would be the first to come
            Map<String, Object> out = result("no_local", take(noLocal, 1), "all", take(all, 2),
                "durable_no_local", take(durableNoLocal, 1));
            durableNoLocal.close();
            session.unsubscribe("dnl");
            return out;
        }
    }

    /** Temporary queue (request/reply from another connection) and temporary topic. */
    Map<String, Object> temporary() throws Exception {
        try (Connection requester = connect(null); Connection responder = connect(null)) {
            Session session = requester.createSession(false, Session.AUTO_ACKNOWLEDGE);
            TemporaryQueue replies = session.createTemporaryQueue();
            MessageConsumer replyConsumer = session.createConsumer(replies);
            Queue requests = session.createQueue(name("requests"));
            TextMessage request = session.createTextMessage("ping");
            request.setJMSReplyTo(replies);
            request.setJMSCorrelationID("corr-1");
            session.createProducer(requests).send(request);

            Session serving = responder.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Message got = serving.createConsumer(requests).receive(WAIT);
            TextMessage reply = serving.createTextMessage("re:" + text(got));
            reply.setJMSCorrelationID(got.getJMSCorrelationID());
            serving.createProducer(got.getJMSReplyTo()).send(reply);
            Message answer = replyConsumer.receive(WAIT);

            TemporaryTopic events = session.createTemporaryTopic();
            MessageConsumer eventConsumer = session.createConsumer(events);
            send(serving, events, "event-1");
            String event = text(eventConsumer.receive(WAIT));
            replyConsumer.close();
            eventConsumer.close();
            replies.delete();
            events.delete();
            return result("reply", text(answer), "correlation", answer == null ? null : answer.getJMSCorrelationID(),
                "reply_to_is_temporary", got.getJMSReplyTo() instanceof TemporaryQueue, "event", event);
        }
    }

    /** QueueBrowser sees the messages in order without taking them; with a selector, only the matching ones. */
    Map<String, Object> browser() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue(name("browse"));
            MessageProducer producer = session.createProducer(queue);
            for (int n = 0; n < 3; n++) {
                TextMessage message = session.createTextMessage("b" + n);
                message.setIntProperty("n", n);
                producer.send(message);
            }
            List<String> seen = new ArrayList<>();
            QueueBrowser browser = session.createBrowser(queue);
            for (Enumeration<?> e = browser.getEnumeration(); e.hasMoreElements() && seen.size() < 100; ) {
                seen.add(text((Message) e.nextElement()));
            }
            browser.close();
            List<String> selected = new ArrayList<>();
            QueueBrowser filtered = session.createBrowser(queue, "n = 1");
            for (Enumeration<?> e = filtered.getEnumeration(); e.hasMoreElements() && selected.size() < 100; ) {
                selected.add(text((Message) e.nextElement()));
            }
            filtered.close();
            return result("browsed", seen, "browsed_selected", selected,
                "consumed_after", take(session.createConsumer(queue), 3));
        }
    }

    /** Local transactions: rollback of sends and of receives, redelivery flag and JMSXDeliveryCount. */
    Map<String, Object> transactions() throws Exception {
        try (Connection connection = connect(null)) {
            Session sending = connection.createSession(true, Session.SESSION_TRANSACTED);
            Queue queue = sending.createQueue(name("tx"));
            MessageProducer producer = sending.createProducer(queue);
            producer.send(sending.createTextMessage("rolled-back"));
            sending.rollback();
            producer.send(sending.createTextMessage("c1"));
            producer.send(sending.createTextMessage("c2"));
            sending.commit();
            Session receiving = connection.createSession(true, Session.SESSION_TRANSACTED);
            MessageConsumer consumer = receiving.createConsumer(queue);
            Message first = consumer.receive(WAIT);
            Map<String, Object> firstSeen = seen(first);
            receiving.rollback();
            Message again = consumer.receive(WAIT);
            Map<String, Object> againSeen = seen(again);
            receiving.commit();
            Message second = consumer.receive(WAIT);
            Map<String, Object> secondSeen = seen(second);
            receiving.commit();
            consumer.close();
            Session plain = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            return result("first", firstSeen, "after_rollback", againSeen, "second", secondSeen,
                "left", quiet(plain.createConsumer(queue)));
        }
    }

    static Map<String, Object> seen(Message message) throws JMSException {
        if (message == null) return null;
        return result("body", text(message), "redelivered", message.getJMSRedelivered(),
            "delivery_count", message.getIntProperty("JMSXDeliveryCount"));
    }

    /** CLIENT_ACKNOWLEDGE with Session.recover(): redelivered, with its delivery count. */
    Map<String, Object> clientAckRecover() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.CLIENT_ACKNOWLEDGE);
            Queue queue = session.createQueue(name("recover"));
            send(session, queue, "k1");
            MessageConsumer consumer = session.createConsumer(queue);
            Map<String, Object> first = seen(consumer.receive(WAIT));
            session.recover();
            Message again = consumer.receive(WAIT);
            Map<String, Object> againSeen = seen(again);
            again.acknowledge();
            consumer.close();
            Session plain = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            return result("first", first, "after_recover", againSeen, "left", quiet(plain.createConsumer(queue)));
        }
    }

    /** TTL: an expired message is not delivered (the client's own expiry check turned off: the broker's). */
    Map<String, Object> ttl() throws Exception {
        JmsConnectionFactory factory = factory();
        factory.setLocalMessageExpiry(false);
        try (Connection connection = factory.createConnection()) {
            connection.start();
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue(name("ttl"));
            MessageProducer producer = session.createProducer(queue);
            producer.setTimeToLive(300);
            producer.send(session.createTextMessage("short-lived"));
            producer.setTimeToLive(0);
            producer.send(session.createTextMessage("long-lived"));
            Thread.sleep(1500);
            MessageConsumer consumer = session.createConsumer(queue);
            Message first = consumer.receive(WAIT);
            return result("first", text(first), "expiration_of_long_lived", first == null ? null : first.getJMSExpiration(),
                "more", quiet(consumer));
        }
    }

    /** JMS 2 delivery delay: a delayed message comes after one sent later without delay. */
    Map<String, Object> delay() throws Exception {
        try (Connection connection = connect(null)) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue(name("delay"));
            MessageConsumer consumer = session.createConsumer(queue);
            MessageProducer producer = session.createProducer(queue);
            producer.setDeliveryDelay(3000); // long enough that "now" is sent well before it ends
            TextMessage late = session.createTextMessage("late");
            producer.send(late);
            producer.setDeliveryDelay(0);
            producer.send(session.createTextMessage("now"));
            Message first = consumer.receive(WAIT);
            Message second = consumer.receive(WAIT);
            return result("order", List.of(String.valueOf(text(first)), String.valueOf(text(second))),
                "delivery_time_after_timestamp", second != null && second.getJMSDeliveryTime() > second.getJMSTimestamp());
        }
    }

    /** Priority: sent before any consumer, consumed highest first (the client's own reordering turned off). */
    Map<String, Object> priority() throws Exception {
        JmsConnectionFactory factory = factory();
        factory.setLocalMessagePriority(false);
        try (Connection connection = factory.createConnection()) {
            connection.start();
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue(name("priority"));
            MessageProducer producer = session.createProducer(queue);
            int[] priorities = {1, 9, 4, 0, 7, 9, 2};
            for (int i = 0; i < priorities.length; i++) {
                producer.send(session.createTextMessage("p" + priorities[i] + "-" + i), DeliveryMode.PERSISTENT,
                    priorities[i], 0);
            }
            return result("order", take(session.createConsumer(queue), 7));
        }
    }

    /** JMSXGroupID: each group's messages go to one consumer, in order. */
    Map<String, Object> groups() throws Exception {
        try (Connection connection = connect(null)) {
            Session one = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Session two = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = one.createQueue(name("groups"));
            MessageConsumer a = one.createConsumer(queue);
            MessageConsumer b = two.createConsumer(queue);
            MessageProducer producer = one.createProducer(queue);
            String[] groups = {"A", "B", "C"};
            for (int i = 0; i < 12; i++) {
                TextMessage message = one.createTextMessage(groups[i % 3] + "-" + (i / 3));
                message.setStringProperty("JMSXGroupID", groups[i % 3]);
                producer.send(message);
            }
            List<List<String>> got = takeFrom(12, a, b);
            return result("a", got.get(0), "b", got.get(1));
        }
    }

    /** Before a restart: a durable subscription with no consumer, and persistent messages kept for it. */
    Map<String, Object> durablePrepare() throws Exception {
        try (Connection connection = connect(name("cid-restart"))) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = session.createTopic(name("restart-topic"));
            session.createDurableSubscriber(topic, "survivor").close();
            MessageProducer producer = session.createProducer(topic);
            producer.setDeliveryMode(DeliveryMode.PERSISTENT);
            for (int i = 0; i < 3; i++) producer.send(session.createTextMessage("kept-" + i));
            return result("sent", 3);
        }
    }

    /** After the restart: the subscription is there with its messages; then it is removed. */
    Map<String, Object> durableDrain() throws Exception {
        try (Connection connection = connect(name("cid-restart"))) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Topic topic = session.createTopic(name("restart-topic"));
            MessageConsumer consumer = session.createDurableSubscriber(topic, "survivor");
            List<String> kept = take(consumer, 3);
            kept.addAll(quiet(consumer));
            consumer.close();
            session.unsubscribe("survivor");
            return result("kept", kept);
        }
    }

    /** A login (the mechanism comes from the URL): refused, or a round trip on a queue. */
    Map<String, Object> login(String user, String password, String mechanism) throws Exception {
        String where = mechanism == null ? url : url + (url.contains("?") ? "&" : "?") + "amqp.saslMechanisms=" + mechanism;
        try (Connection connection = factory(where, user, password).createConnection()) {
            connection.start();
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            Queue queue = session.createQueue(name("login"));
            MessageConsumer consumer = session.createConsumer(queue);
            send(session, queue, "logged-in");
            return result("refused", null, "bodies", take(consumer, 1));
        } catch (jakarta.jms.JMSSecurityException refused) {
            return result("refused", refused.getClass().getSimpleName(), "message", refused.getMessage());
        }
    }
}
