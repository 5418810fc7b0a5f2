import java.io.BufferedInputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.FileInputStream;
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The benchmark's load producer: sends pre-generated records to Kafka, either as fast as
 * the broker takes them (a backlog) or each at the wall-clock time equal to its event time
 * (a steady, real-time stream). A Java producer, because kafka-python tops out near 7k
 * records/s on this machine while sharing two cores with Spark.
 *
 * <p>Input: records of [int64 event time ms][int8 stream: 0 log, 1 metric][int32 key
 * length, -1 for none][key][int32 value length][value], big-endian (Python's struct "&gt;").
 *
 * <p>Usage: PacedProducer BOOTSTRAP LOGS_TOPIC METRICS_TOPIC FILE paced|fast
 *
 * <p>Prints one JSON line at the end: records, seconds, records/s, and for paced runs how
 * late the sends were against their event time (p50/p99/max ms).
 */
public final class PacedProducer {
  public static void main(String[] args) throws Exception {
    if (args.length != 5) {
      System.err.println("usage: PacedProducer BOOTSTRAP LOGS_TOPIC METRICS_TOPIC FILE paced|fast");
      System.exit(2);
    }
    boolean paced = args[4].equals("paced");
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    // Paced: send at once (the latency measurement starts at the send). Fast: big batches.
    p.put(ProducerConfig.LINGER_MS_CONFIG, paced ? "0" : "20");
    p.put(ProducerConfig.BATCH_SIZE_CONFIG, String.valueOf(paced ? 64 * 1024 : 512 * 1024));
    p.put(ProducerConfig.ACKS_CONFIG, "1");
    AtomicLong failed = new AtomicLong();
    long n = 0;
    long[] late = new long[1 << 16];
    int lateCount = 0;
    long maxLate = 0;
    long start = System.currentTimeMillis();
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
        DataInputStream in =
            new DataInputStream(new BufferedInputStream(new FileInputStream(args[3]), 1 << 20))) {
      while (true) {
        long t;
        try {
          t = in.readLong();
        } catch (EOFException end) {
          break;
        }
        int stream = in.readByte();
        int keyLen = in.readInt();
        byte[] key = null;
        if (keyLen >= 0) {
          key = new byte[keyLen];
          in.readFully(key);
        }
        byte[] value = new byte[in.readInt()];
        in.readFully(value);
        if (paced) {
          long wait = t - System.currentTimeMillis();
          if (wait > 0) {
            Thread.sleep(wait);
          }
          long behind = System.currentTimeMillis() - t;
          maxLate = Math.max(maxLate, behind);
          if ((n & 15) == 0) {
            if (lateCount == late.length) {
              late = Arrays.copyOf(late, late.length * 2);
            }
            late[lateCount++] = behind;
          }
        }
        String topic = stream == 0 ? args[1] : args[2];
        producer.send(
            new ProducerRecord<>(topic, null, t, key, value),
            (meta, e) -> {
              if (e != null) {
                failed.incrementAndGet();
              }
            });
        n++;
      }
      producer.flush();
    }
    double secs = (System.currentTimeMillis() - start) / 1000.0;
    long[] sorted = Arrays.copyOf(late, lateCount);
    Arrays.sort(sorted);
    long p50 = lateCount == 0 ? 0 : sorted[lateCount / 2];
    long p99 = lateCount == 0 ? 0 : sorted[Math.min(lateCount - 1, (int) (lateCount * 0.99))];
    System.out.printf(
        "{\"records\": %d, \"failed\": %d, \"seconds\": %.3f, \"records_per_s\": %.1f, "
            + "\"late_ms_p50\": %d, \"late_ms_p99\": %d, \"late_ms_max\": %d}%n",
        n, failed.get(), secs, n / Math.max(secs, 1e-9), p50, p99, maxLate);
    if (failed.get() > 0) {
      System.exit(1);
    }
  }
}
