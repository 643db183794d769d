/*
 * A throwaway Neo4j Community server for tests: the embedded database with its Bolt connector
 * on 127.0.0.1:<port>, authentication off, blocking until the process is told to stop.
 *
 * Run as a single-file source program (Java 11+, JEP 330; no compile step):
 *   java -cp '.ci/cache/neo4j-jars/*' .ci/neo4j/Launcher.java <dbdir> <port>
 * The jars come from .ci/neo4j/pom.xml. SIGTERM/SIGINT run the JVM shutdown hooks, and the hook
 * below shuts the database down cleanly (checkpoint, release the store lock) before exit.
 *
 * Loopback only and no auth: this is for CI and a developer's own machine, never a deployment.
 */

import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;

import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;

public final class Launcher {
    /** Page cache for the test database: the graphs in tests are tiny (bytes, Neo4j's unit). */
    private static final long PAGE_CACHE_BYTES = 64L * 1024 * 1024;

    private Launcher() {}

    public static void main(String[] args) throws InterruptedException {
        if (args.length != 2) {
            System.err.println("usage: java -cp '<jars>/*' Launcher.java <dbdir> <port>");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        int port;
        try {
            port = Integer.parseInt(args[1]);
        } catch (NumberFormatException e) {
            System.err.println("port must be an integer, got: " + args[1]);
            System.exit(2);
            return;
        }

        long started = System.nanoTime();
        DatabaseManagementService service = new DatabaseManagementServiceBuilder(home)
                .setConfig(BoltConnector.enabled, true)
                .setConfig(BoltConnector.listen_address, new SocketAddress("127.0.0.1", port))
                .setConfig(BoltConnector.encryption_level, BoltConnector.EncryptionLevel.DISABLED)
                .setConfig(GraphDatabaseSettings.auth_enabled, false)
                .setConfig(GraphDatabaseSettings.pagecache_memory, PAGE_CACHE_BYTES)
                .setConfig(GraphDatabaseSettings.preallocate_logical_logs, false)
                .setConfig(GraphDatabaseSettings.udc_enabled, false)
                .build();

        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            System.out.println("neo4j launcher: shutting down");
            service.shutdown();
            stopped.countDown();
        }, "neo4j-shutdown"));

        // The default database is available once build() returns; say so for the log.
        System.out.printf("neo4j launcher: bolt://127.0.0.1:%d ready in %.1f s (store %s)%n",
                port, Duration.ofNanos(System.nanoTime() - started).toMillis() / 1000.0, home);
        System.out.flush();
        stopped.await();
    }
}
