/*
 * scripts/tck's JUnit Platform listener: before each TCK test method, asks the script (over a line on a loopback
 * socket, port in the system property subgate.tck.control) to give the server a fresh state, and waits for the
 * answer. Without the property it does nothing. Registered through META-INF/services; part of subgate, not of
 * the TCK.
 */
package subgate.tck;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;

public final class FreshStatePerTest implements TestExecutionListener {
    private static final int TIMEOUT_MS = 120_000;

    @Override
    public void executionStarted(TestIdentifier test) {
        if (test.isTest()) {
            ask("fresh " + test.getUniqueId());
        }
    }

    private static void ask(String line) {
        String port = System.getProperty("subgate.tck.control");
        if (port == null) {
            return;
        }
        try (Socket socket = new Socket("127.0.0.1", Integer.parseInt(port))) {
            socket.setSoTimeout(TIMEOUT_MS);
            OutputStream out = socket.getOutputStream();
            out.write((line.replace('\n', ' ') + "\n").getBytes(StandardCharsets.UTF_8));
            out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
            String answer = in.readLine();
            if (!"ok".equals(answer)) {
                throw new IllegalStateException("scripts/tck answered " + answer + " to: " + line);
            }
        } catch (java.io.IOException e) {
            throw new IllegalStateException("scripts/tck did not answer: " + line, e);
        }
    }
}
