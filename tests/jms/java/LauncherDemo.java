// The JUnit 5 recipe of docs/jms.md without JUnit (its jars are not available offline): main() does what the
// recipe's @BeforeAll, @Test and @AfterAll do, with the same SubgateLauncher, and prints what it saw as one JSON
// line for tests/jms/test_launcher.py.

import jakarta.jms.ConnectionFactory;
import jakarta.jms.JMSContext;
import jakarta.jms.Queue;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.qpid.jms.JmsConnectionFactory;

public final class LauncherDemo {
    public static void main(String[] args) throws Exception {
        Map<String, Object> seen = new LinkedHashMap<>();
        SubgateLauncher broker = SubgateLauncher.start(); // @BeforeAll
        long pid = broker.pid();
        try {
            ConnectionFactory factory = new JmsConnectionFactory(broker.url()); // @Test
            try (JMSContext context = factory.createContext()) {
                Queue queue = context.createQueue("launcher-demo");
                context.createProducer().send(queue, "hello from JUnit");
                seen.put("body", context.createConsumer(queue).receiveBody(String.class, 10_000));
            }
            seen.put("url", broker.url());
            seen.put("pid", pid);
        } finally {
            broker.close(); // @AfterAll
        }
        seen.put("stopped", ProcessHandle.of(pid).map(p -> !p.isAlive()).orElse(true));
        System.out.println(Json.write(seen));
        System.exit(0);
    }
}
