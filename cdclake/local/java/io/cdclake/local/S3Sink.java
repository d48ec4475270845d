package io.cdclake.local;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.GZIPOutputStream;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.sink.SinkConnector;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.http.urlconnection.UrlConnectionHttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.S3ClientBuilder;
import software.amazon.awssdk.services.s3.model.PutObjectRequest;

/**
 * The local stack's stand-in for Confluent's S3 sink, which no registry reachable here serves.
 *
 * <p>It reads the subset of Confluent's settings that connectors/configs.py generates, with
 * Confluent's meaning, so the production config runs unchanged apart from class and endpoint:
 * DefaultPartitioner layout {@code <topics.dir>/<topic>/partition=<p>/<topic>+<p>+<start>.json},
 * ByteArrayFormat (value bytes, the separator taken literally as Confluent takes it),
 * {@code flush.size}, wall-clock {@code rotate.schedule.interval.ms} (at the next multiple of the
 * interval, also while no records arrive), and {@code
 * rotate.interval.ms}, which like Confluent's needs a time-based partitioner's timestamp
 * extractor and so does nothing with DefaultPartitioner. Credentials come from the AWS default
 * provider chain, as on MSK Connect. Offsets are committed only for records in uploaded files.
 */
public class S3Sink extends SinkConnector {
  static final String DEFAULT_PARTITIONER =
      "io.confluent.connect.storage.partitioner.DefaultPartitioner";
  static final String BYTE_ARRAY_FORMAT =
      "io.confluent.connect.s3.format.bytearray.ByteArrayFormat";

  static final ConfigDef CONFIG =
      new ConfigDef()
          .define("s3.bucket.name", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "bucket")
          .define("s3.region", ConfigDef.Type.STRING, "us-east-1", ConfigDef.Importance.LOW, "")
          .define("store.url", ConfigDef.Type.STRING, null, ConfigDef.Importance.LOW, "endpoint")
          .define("topics.dir", ConfigDef.Type.STRING, "topics", ConfigDef.Importance.LOW, "")
          .define("flush.size", ConfigDef.Type.INT, ConfigDef.Importance.HIGH, "records a file")
          .define("rotate.interval.ms", ConfigDef.Type.LONG, -1L, ConfigDef.Importance.LOW, "")
          .define(
              "rotate.schedule.interval.ms", ConfigDef.Type.LONG, -1L, ConfigDef.Importance.LOW, "")
          .define("timezone", ConfigDef.Type.STRING, "", ConfigDef.Importance.LOW, "")
          .define(
              "partitioner.class",
              ConfigDef.Type.STRING,
              DEFAULT_PARTITIONER,
              ConfigDef.Importance.LOW,
              "")
          .define("format.class", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "")
          .define(
              "format.bytearray.extension", ConfigDef.Type.STRING, ".bin", ConfigDef.Importance.LOW, "")
          .define("s3.compression.type", ConfigDef.Type.STRING, "none", ConfigDef.Importance.LOW, "")
          .define(
              "behavior.on.null.values", ConfigDef.Type.STRING, "fail", ConfigDef.Importance.LOW, "");

  private Map<String, String> props;

  @Override
  public void start(Map<String, String> props) {
    Settings.parse(props); // fail at creation, as Confluent's validation does
    this.props = props;
  }

  @Override
  public Class<? extends Task> taskClass() {
    return Writer.class;
  }

  @Override
  public List<Map<String, String>> taskConfigs(int maxTasks) {
    List<Map<String, String>> configs = new ArrayList<>();
    for (int i = 0; i < maxTasks; i++) {
      configs.add(props);
    }
    return configs;
  }

  @Override
  public void stop() {}

  @Override
  public ConfigDef config() {
    return CONFIG;
  }

  @Override
  public String version() {
    return "local";
  }

  /** Parsed settings; rejects what this stand-in does not implement instead of ignoring it. */
  static final class Settings {
    String bucket;
    String region;
    String endpoint;
    String topicsDir;
    int flushSize;
    long scheduleIntervalMs;
    String extension;
    byte[] separator;
    boolean gzip;
    boolean ignoreNulls;

    static Settings parse(Map<String, String> props) {
      Map<String, Object> values = CONFIG.parse(props);
      Settings s = new Settings();
      if (!DEFAULT_PARTITIONER.equals(values.get("partitioner.class"))) {
        throw new ConfigException("only DefaultPartitioner is implemented locally");
      }
      if (!BYTE_ARRAY_FORMAT.equals(values.get("format.class"))) {
        throw new ConfigException("only ByteArrayFormat is implemented locally");
      }
      s.bucket = (String) values.get("s3.bucket.name");
      s.region = (String) values.get("s3.region");
      s.endpoint = (String) values.get("store.url");
      s.topicsDir = (String) values.get("topics.dir");
      s.flushSize = (Integer) values.get("flush.size");
      s.scheduleIntervalMs = (Long) values.get("rotate.schedule.interval.ms");
      if (s.scheduleIntervalMs > 0 && ((String) values.get("timezone")).isEmpty()) {
        throw new ConfigException("rotate.schedule.interval.ms needs timezone (as Confluent's)");
      }
      s.extension = (String) values.get("format.bytearray.extension");
      // Whitespace matters and ConfigDef trims, so (like Confluent) read the original string.
      String separator = props.getOrDefault("format.bytearray.separator", System.lineSeparator());
      s.separator = separator.getBytes(StandardCharsets.UTF_8);
      String compression = (String) values.get("s3.compression.type");
      if (!compression.equals("none") && !compression.equals("gzip")) {
        throw new ConfigException("s3.compression.type must be none or gzip");
      }
      s.gzip = compression.equals("gzip");
      s.ignoreNulls = "ignore".equals(values.get("behavior.on.null.values"));
      return s;
    }
  }

  /** One task: a buffer per assigned partition, uploaded as one object per file. */
  public static class Writer extends SinkTask {
    private static final Logger LOG = LoggerFactory.getLogger(Writer.class);
    private Settings settings;
    private S3Client s3;
    private final Map<TopicPartition, PartitionBuffer> buffers = new HashMap<>();
    private final Map<TopicPartition, Long> committed = new HashMap<>();

    static final class PartitionBuffer {
      long startOffset = -1;
      long lastOffset = -1;
      long openedAtMs;
      int records;
      final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    }

    @Override
    public String version() {
      return "local";
    }

    @Override
    public void start(Map<String, String> props) {
      settings = Settings.parse(props);
      S3ClientBuilder builder =
          S3Client.builder()
              .region(Region.of(settings.region))
              .httpClientBuilder(UrlConnectionHttpClient.builder());
      if (settings.endpoint != null && !settings.endpoint.isEmpty()) {
        builder.endpointOverride(URI.create(settings.endpoint)).forcePathStyle(true);
      }
      s3 = builder.build();
    }

    @Override
    public void open(Collection<TopicPartition> partitions) {
      for (TopicPartition tp : partitions) {
        buffers.put(tp, new PartitionBuffer());
      }
    }

    @Override
    public void close(Collection<TopicPartition> partitions) {
      // Unwritten records are not committed, so the next owner reads them again.
      for (TopicPartition tp : partitions) {
        buffers.remove(tp);
        committed.remove(tp);
      }
    }

    @Override
    public void put(Collection<SinkRecord> records) {
      long now = System.currentTimeMillis();
      for (SinkRecord record : records) {
        TopicPartition tp = new TopicPartition(record.topic(), record.kafkaPartition());
        PartitionBuffer buffer = buffers.computeIfAbsent(tp, k -> new PartitionBuffer());
        if (record.value() == null) {
          if (!settings.ignoreNulls) {
            throw new ConnectException("null value at " + tp + "@" + record.kafkaOffset());
          }
          continue;
        }
        if (buffer.startOffset < 0) {
          buffer.startOffset = record.kafkaOffset();
          buffer.openedAtMs = now;
        }
        byte[] value = (byte[]) record.value();
        buffer.bytes.write(value, 0, value.length);
        buffer.bytes.write(settings.separator, 0, settings.separator.length);
        buffer.records++;
        buffer.lastOffset = record.kafkaOffset();
        if (buffer.records >= settings.flushSize) {
          upload(tp, buffer);
        }
      }
      // Connect calls put() with no records while a topic is idle, so a quiet partition's
      // open file still rotates on the wall clock.
      if (settings.scheduleIntervalMs > 0) {
        for (Map.Entry<TopicPartition, PartitionBuffer> entry : buffers.entrySet()) {
          PartitionBuffer buffer = entry.getValue();
          // Like Confluent's: boundaries are multiples of the interval on the wall clock.
          long interval = settings.scheduleIntervalMs;
          long due = (buffer.openedAtMs / interval + 1) * interval;
          if (buffer.records > 0 && now >= due) {
            upload(entry.getKey(), buffer);
          }
        }
      }
    }

    private void upload(TopicPartition tp, PartitionBuffer buffer) {
      String name =
          String.format(
              "%s/%s/partition=%d/%s+%d+%010d%s%s",
              settings.topicsDir,
              tp.topic(),
              tp.partition(),
              tp.topic(),
              tp.partition(),
              buffer.startOffset,
              settings.extension,
              settings.gzip ? ".gz" : "");
      byte[] body = buffer.bytes.toByteArray();
      if (settings.gzip) {
        ByteArrayOutputStream zipped = new ByteArrayOutputStream();
        try (OutputStream out = new GZIPOutputStream(zipped)) {
          out.write(body);
        } catch (IOException e) {
          throw new ConnectException(e);
        }
        body = zipped.toByteArray();
      }
      s3.putObject(
          PutObjectRequest.builder().bucket(settings.bucket).key(name).build(),
          RequestBody.fromBytes(body));
      LOG.info("uploaded {} ({} records)", name, buffer.records);
      committed.put(tp, buffer.lastOffset + 1);
      buffers.put(tp, new PartitionBuffer());
    }

    @Override
    public Map<TopicPartition, OffsetAndMetadata> preCommit(
        Map<TopicPartition, OffsetAndMetadata> currentOffsets) {
      Map<TopicPartition, OffsetAndMetadata> result = new HashMap<>();
      for (TopicPartition tp : currentOffsets.keySet()) {
        Long next = committed.get(tp);
        if (next != null) {
          result.put(tp, new OffsetAndMetadata(next));
        }
      }
      return result;
    }

    @Override
    public void stop() {
      if (s3 != null) {
        s3.close();
      }
    }
  }
}
