// Starts a throwaway subgate (`subgate serve --ephemeral`) for a Java test class and stops it again: the launcher
// of the JUnit 5 recipe in docs/jms.md ("A broker for test suites"): copy this file into your test sources. No dependency but
// the JDK.
//
//   try (SubgateLauncher broker = SubgateLauncher.start()) { ... new JmsConnectionFactory(broker.url()) ... }
//
// The command is `subgate` on the PATH, or the words of $SUBGATE_COMMAND (e.g. "/venv/bin/python -m subgate.cli").
// The server's log goes to this process's stderr. The server also ends by itself if this JVM dies.

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public final class SubgateLauncher implements AutoCloseable {
    private static final Pattern URL = Pattern.compile("\"url\":\\s*\"([^\"]+)\"");
    private final Process process;
    private final String url;

    private SubgateLauncher(Process process, String url) {
        this.process = process;
        this.url = url;
    }

    /** Start a server (extra `serve` options, e.g. "--http", "127.0.0.1:0") and wait for its URL line. */
    public static SubgateLauncher start(String... options) throws Exception {
        String configured = System.getenv("SUBGATE_COMMAND");
        List<String> command = new ArrayList<>(configured == null || configured.isBlank()
            ? List.of("subgate") : Arrays.asList(configured.trim().split("\\s+")));
        command.addAll(List.of("serve", "--ephemeral"));
        command.addAll(Arrays.asList(options));
        Process process = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        String line;
        try {
            line = CompletableFuture.supplyAsync(() -> {
                try {
                    return out.readLine();
                } catch (IOException e) {
                    return null;
                }
            }).get(30, TimeUnit.SECONDS);
        } catch (Exception e) {
            line = null;
        }
        Matcher match = URL.matcher(line == null ? "" : line);
        if (!match.find()) {
            process.destroyForcibly();
            throw new IllegalStateException("subgate serve --ephemeral gave no URL line: " + line);
        }
        return new SubgateLauncher(process, match.group(1));
    }

    /** The AMQP URL for a JmsConnectionFactory: amqp://127.0.0.1:PORT. */
    public String url() {
        return url;
    }

    public long pid() {
        return process.pid();
    }

    /** SIGTERM, then SIGKILL if the server has not ended within 20 s. */
    @Override
    public void close() throws InterruptedException {
        process.destroy();
        if (!process.waitFor(20, TimeUnit.SECONDS)) {
            process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
    }
}
