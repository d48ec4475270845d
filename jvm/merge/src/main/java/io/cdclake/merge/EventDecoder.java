package io.cdclake.merge;

import java.io.Serializable;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.time.DateTimeException;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * A schema-included Debezium event, the UTF-8 bytes of its payload, checked and decoded the way
 * cdclake_merge.debezium decodes it, in one call: is it an event the lake can order, its order,
 * and each value of the image its op uses in the canonical form the fold reads (a decimal as its
 * text, a timestamp in microseconds, a time of day as {@code HH:MM:SS.ffffff}, bytes as base64),
 * with the names of the columns that hold a TOAST placeholder.
 *
 * <p>Null means "not certain", as for {@link PayloadParser}, which reads the payload: the line
 * goes to the Python parser, which decides it and is the reference. Every check is one the
 * Python parser makes, or a stricter one (a pattern that must match the whole text).
 *
 * <p>The plan (jvm_parse.py) is the payload's struct type as Spark writes it: {@code op},
 * {@code source} and the images planned; each image field carries in its metadata how it
 * decodes: {@code kind} (plain, float, binary, decimal, ts_ms, ts_us, ts_ns, ts_iso, time_ms,
 * time_us, time_ns), a decimal's {@code precision} and {@code scale}, {@code key} for the
 * table's key columns.
 */
public final class EventDecoder implements UDF1<byte[], Row> {
  private static final long serialVersionUID = 1L;
  private static final long MIN_MICROS = -62135596800L * 1_000_000; // 0001-01-01T00:00:00Z
  private static final long MAX_MICROS = 253402300799L * 1_000_000 + 999_999; // 9999-12-31
  private static final long DAY_MICROS = 86_400_000_000L;
  // Debezium's ZonedTimestamp in UTC; fractions past microseconds are cut, as Python cuts them.
  private static final Pattern ISO_UTC =
      Pattern.compile(
          "([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-5][0-9])"
              + "(?:\\.([0-9]{1,9}))?Z");
  // source.sequence as Debezium writes it, ["<commit LSN>","<LSN>"] (either may be null), in
  // JSON Python reads the same (no leading zeros, no control characters in a string).
  private static final Pattern SEQUENCE =
      Pattern.compile(
          "\\[[ \\t\\r\\n]*(null|\"[0-9]{1,18}\"|0|[1-9][0-9]{0,17})[ \\t\\r\\n]*,"
              + "[ \\t\\r\\n]*(null|\"[^\"\\\\\\x00-\\x1f]*\"|-?(?:0|[1-9][0-9]{0,17}))"
              + "[ \\t\\r\\n]*\\]");
  // Keys of a flattened record (ExtractNewRecordState), which the Python parser looks for
  // among the payload's own keys (debezium._parse): a payload holding one is Python's.
  private static final Set<String> FLATTENED = Set.of("__op", "__deleted", "__lsn");

  private final PayloadParser parser;
  private final StructType type;
  private final int op;
  private final int source;
  private final int lsnAt;
  private final int sequenceAt;
  private final int millisAt;
  private final int microsAt;
  private final Image before;
  private final Image after;
  private final Image[] images; // those planned, in the order of the output's fields
  private final Toast toast;

  /**
   * {@code planJson}: the payload's struct type with the image fields' metadata (above);
   * {@code placeholder}: the TOAST placeholder Debezium writes for an unchanged large value.
   */
  public EventDecoder(String planJson, String placeholder) {
    StructType payload = (StructType) DataType.fromJson(planJson);
    this.parser = new PayloadParser(payload, FLATTENED);
    this.toast = new Toast(placeholder);
    this.op = payload.fieldIndex("op");
    this.source = payload.fieldIndex("source");
    StructType src = (StructType) payload.fields()[source].dataType();
    this.lsnAt = src.fieldIndex("lsn");
    this.sequenceAt = src.fieldIndex("sequence");
    this.millisAt = src.fieldIndex("ts_ms");
    this.microsAt = src.fieldIndex("ts_usec");
    List<String> names = Arrays.asList(payload.fieldNames());
    this.before = names.contains("before") ? new Image(payload, "before") : null;
    this.after = names.contains("after") ? new Image(payload, "after") : null;
    this.images =
        Arrays.stream(new Image[] {before, after}).filter(i -> i != null).toArray(Image[]::new);
    StructType out =
        new StructType()
            .add("op", DataTypes.StringType)
            .add("order", DataTypes.StringType)
            .add("lsn", DataTypes.LongType)
            .add("source_ts_ms", DataTypes.LongType)
            .add("toast", ArrayType.apply(DataTypes.StringType));
    for (Image image : images) {
      out = out.add(image.name, image.type);
    }
    this.type = out;
  }

  /** The struct an event decodes to: op, order, lsn, source_ts_ms, toast and the images. */
  public StructType dataType() {
    return type;
  }

  @Override
  public Row call(byte[] text) {
    if (text == null) {
      return null;
    }
    Row payload = parser.call(text);
    if (payload == null) {
      return null;
    }
    String kind = payload.getString(op);
    Row src = payload.getStruct(source);
    if (kind == null || src == null || src.isNullAt(lsnAt)) {
      return null;
    }
    long lsn = src.getLong(lsnAt);
    Long commit = commit(src.isNullAt(sequenceAt) ? null : src.getString(sequenceAt), lsn);
    if (lsn < 0 || commit == null) {
      return null;
    }
    Long sourceMillis = src.isNullAt(millisAt) ? null : (Long) src.getLong(millisAt);
    if (sourceMillis == null && !src.isNullAt(microsAt)) {
      sourceMillis = Math.floorDiv(src.getLong(microsAt), 1000L);
    }
    Image image; // the one the op uses; a truncate uses none
    switch (kind) {
      case "t":
        image = null;
        break;
      case "d":
        image = before;
        break;
      case "c":
      case "u":
      case "r":
        image = after;
        break;
      default:
        return null;
    }
    List<String> toastNames = new ArrayList<>();
    Row decoded = null;
    if (!kind.equals("t")) {
      Row values = image == null ? null : payload.getStruct(image.index);
      decoded = values == null ? null : image.decode(values, toast, toastNames);
      if (decoded == null) {
        return null;
      }
    }
    Object[] out = new Object[type.fields().length];
    out[0] = kind;
    // A snapshot's read is at its position, before every change committed there or later
    // (debezium.Change.order); an incremental snapshot's reads have no LSN: Python's.
    out[1] = kind.equals("r") ? padded(lsn) + padded(0) : padded(commit) + padded(lsn);
    out[2] = lsn;
    out[3] = sourceMillis;
    out[4] = toastNames;
    for (int k = 0; k < images.length; k++) {
      out[5 + k] = images[k] == image ? decoded : null;
    }
    return RowFactory.create(out);
  }

  /**
   * The commit position a sequence names: the event's own LSN if there is no sequence, 0
   * (debezium.UNKNOWN_COMMIT, placed by the job) if its first element is null, null if unsure.
   */
  static Long commit(String sequence, long lsn) {
    if (sequence == null || sequence.isEmpty()) {
      return lsn;
    }
    Matcher m = SEQUENCE.matcher(sequence);
    if (!m.matches()) {
      return null;
    }
    String first = m.group(1);
    if (first.equals("null")) {
      return 0L;
    }
    return Long.parseLong(first.replace("\"", ""));
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  /** A non-negative number in 20 digits: orders as text as it does as a number. */
  private static String padded(long n) {
    String digits = Long.toString(n);
    return "00000000000000000000".substring(digits.length()) + digits;
  }

  /** Debezium's TOAST placeholder as a text or bytes value holds it. */
  private static final class Toast implements Serializable {
    private static final long serialVersionUID = 1L;
    private final String[] texts;
    private final byte[][] bytes;

    Toast(String placeholder) {
      byte[] raw = bytes(placeholder);
      StringBuilder hex = new StringBuilder();
      for (byte b : raw) {
        hex.append(String.format(Locale.ROOT, "%02x", b & 0xFF));
      }
      texts = new String[] {placeholder, Base64.getEncoder().encodeToString(raw), hex.toString()};
      // bytes as read from base64: the placeholder itself (binary.handling.mode=base64), or
      // what its hex spelling (binary.handling.mode=hex) means as base64
      bytes = new byte[][] {raw, Base64.getDecoder().decode(hex.toString())};
    }

    boolean holds(Object value) {
      if (value instanceof String) {
        for (String t : texts) {
          if (t.equals(value)) {
            return true;
          }
        }
      } else if (value instanceof byte[]) {
        for (byte[] b : bytes) {
          if (Arrays.equals(b, (byte[]) value)) {
            return true;
          }
        }
      }
      return false;
    }
  }

  private enum Kind {
    PLAIN,
    FLOAT,
    BINARY,
    DECIMAL,
    TS_MS,
    TS_US,
    TS_NS,
    TS_ISO,
    TIME_MS,
    TIME_US,
    TIME_NS
  }

  /** One image of the payload: its fields, how each decodes, the struct they decode to. */
  private static final class Image implements Serializable {
    private static final long serialVersionUID = 1L;
    final String name;
    final int index;
    final StructType type;
    private final String[] names;
    private final Kind[] kinds;
    private final boolean[] keys;
    private final boolean[] placeable; // a text or bytes value, which may hold the placeholder
    private final int[] precisions;
    private final int[] scales;

    Image(StructType payload, String name) {
      this.name = name;
      this.index = payload.fieldIndex(name);
      StructField[] fields = ((StructType) payload.fields()[index].dataType()).fields();
      int n = fields.length;
      names = new String[n];
      kinds = new Kind[n];
      keys = new boolean[n];
      placeable = new boolean[n];
      precisions = new int[n];
      scales = new int[n];
      StructType out = new StructType();
      for (int i = 0; i < n; i++) {
        StructField f = fields[i];
        Metadata m = f.metadata();
        names[i] = f.name();
        kinds[i] = Kind.valueOf(m.getString("kind").toUpperCase(Locale.ROOT));
        keys[i] = m.contains("key") && m.getBoolean("key");
        placeable[i] = f.dataType() instanceof StringType || f.dataType() instanceof BinaryType;
        if (kinds[i] == Kind.DECIMAL) {
          precisions[i] = (int) m.getLong("precision");
          scales[i] = (int) m.getLong("scale");
        }
        out = out.add(names[i], decodedType(kinds[i], f.dataType()));
      }
      this.type = out;
    }

    private static DataType decodedType(Kind kind, DataType read) {
      switch (kind) {
        case PLAIN:
        case FLOAT:
          return read;
        case BINARY:
        case DECIMAL:
        case TIME_MS:
        case TIME_US:
        case TIME_NS:
          return DataTypes.StringType;
        default:
          return DataTypes.LongType;
      }
    }

    /** The image's values decoded, TOAST placeholders named in {@code toast}; null if unsure. */
    Row decode(Row values, Toast placeholder, List<String> toast) {
      Object[] out = new Object[names.length];
      for (int i = 0; i < names.length; i++) {
        Object v = values.isNullAt(i) ? null : values.get(i);
        if (v == null || placeable[i] && placeholder.holds(v)) {
          if (keys[i]) {
            return null;
          }
          if (v != null) {
            toast.add(names[i]);
          }
          continue;
        }
        out[i] = value(v, i);
        if (out[i] == null) {
          return null;
        }
      }
      return RowFactory.create(out);
    }

    /** A value's canonical form, null if it does not decode. */
    private Object value(Object v, int i) {
      switch (kinds[i]) {
        case PLAIN:
          return v;
        case FLOAT:
          return Double.isFinite(((Number) v).doubleValue()) ? v : null;
        case BINARY:
          return Base64.getEncoder().encodeToString((byte[]) v);
        case DECIMAL:
          return decimal((byte[]) v, precisions[i], scales[i]);
        case TS_MS:
          return inRange(((Number) v).longValue(), MIN_MICROS / 1000, MAX_MICROS / 1000, 1000);
        case TS_US:
          return inRange(((Number) v).longValue(), MIN_MICROS, MAX_MICROS, 1);
        case TS_NS:
          return inRange(Math.floorDiv(((Number) v).longValue(), 1000L), MIN_MICROS, MAX_MICROS, 1);
        case TS_ISO:
          return isoMicros((String) v);
        case TIME_MS:
          return timeText(inRange(((Number) v).longValue(), 0, DAY_MICROS / 1000, 1000));
        case TIME_US:
          return timeText(inRange(((Number) v).longValue(), 0, DAY_MICROS, 1));
        case TIME_NS:
          long micros = Math.floorDiv(((Number) v).longValue(), 1000L);
          return timeText(inRange(micros, 0, DAY_MICROS, 1));
        default:
          return null;
      }
    }
  }

  /** {@code n * unit} when {@code low <= n <= high} (checked before multiplying), else null. */
  private static Long inRange(long n, long low, long high, long unit) {
    return n >= low && n <= high ? n * unit : null;
  }

  /**
   * Big-endian two's complement of at most 8 bytes (none is zero) scaled by {@code scale}, as
   * its plain text (as Python writes it: 0.00000001, not Spark's 1E-8); null if wider, or more
   * digits than {@code precision}. Larger values are left to Python.
   */
  static String decimal(byte[] b, int precision, int scale) {
    if (b.length > 8 || scale > 18) {
      return null;
    }
    long unscaled = b.length > 0 && b[0] < 0 ? -1L : 0L;
    for (byte x : b) {
      unscaled = unscaled << 8 | (x & 0xFF);
    }
    if (precision <= 18) {
      long limit = 1;
      for (int k = 0; k < precision; k++) {
        limit *= 10;
      }
      if (unscaled <= -limit || unscaled >= limit) {
        return null;
      }
    }
    return BigDecimal.valueOf(unscaled, scale).toPlainString();
  }

  /** Microseconds since the epoch of a ZonedTimestamp in UTC, null if it names no instant. */
  static Long isoMicros(String text) {
    Matcher m = ISO_UTC.matcher(text);
    if (!m.matches()) {
      return null;
    }
    int year = Integer.parseInt(m.group(1));
    int hour = Integer.parseInt(m.group(4));
    int minute = Integer.parseInt(m.group(5));
    if (year == 0 || hour > 23 || minute > 59) {
      return null;
    }
    long day;
    try {
      int month = Integer.parseInt(m.group(2));
      day = LocalDate.of(year, month, Integer.parseInt(m.group(3))).toEpochDay();
    } catch (DateTimeException e) {
      return null;
    }
    String fraction = m.group(7) == null ? "" : m.group(7);
    fraction = fraction.length() > 6 ? fraction.substring(0, 6) : fraction;
    long micros = fraction.isEmpty() ? 0 : Long.parseLong(fraction);
    for (int k = fraction.length(); k < 6; k++) {
      micros *= 10;
    }
    long seconds = day * 86_400 + hour * 3_600L + minute * 60L + Integer.parseInt(m.group(6));
    return seconds * 1_000_000 + micros;
  }

  /** {@code HH:MM:SS.ffffff} of a time of day in microseconds (24:00 included), or null. */
  static String timeText(Long micros) {
    if (micros == null) {
      return null;
    }
    long m = micros;
    StringBuilder s = new StringBuilder(15);
    two(s, m / 3_600_000_000L).append(':');
    two(s, m / 60_000_000 % 60).append(':');
    two(s, m / 1_000_000 % 60).append('.');
    String fraction = Long.toString(m % 1_000_000);
    return s.append("000000", fraction.length(), 6).append(fraction).toString();
  }

  private static StringBuilder two(StringBuilder s, long n) {
    return s.append(n < 10 ? "0" : "").append(n);
  }
}
