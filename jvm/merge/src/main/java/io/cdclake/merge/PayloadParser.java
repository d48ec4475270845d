package io.cdclake.merge;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.io.Serializable;
import java.util.Base64;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * A Debezium payload, the UTF-8 bytes after a line's head, read into a struct of the types a
 * head's plan gives (jvm_parse.py), as Spark's {@code from_json} reads them, at a quarter of
 * its cost: Jackson reads the bytes themselves (from_json decodes each row's text through a
 * new InputStreamReader) and no per-object setup of Spark's runs.
 *
 * <p>Null means "not certain": the line goes to the Python parser (cdclake_merge.debezium),
 * which decides it and is the reference. So the reader takes only what it is sure Python
 * reads the same way: valid UTF-8 in its shortest forms, without a NUL, a byte order mark or a
 * backslash-u escape (which could spell a surrogate or a key Python treats apart); one JSON
 * object with nothing after it, nested at most {@link #MAX_DEPTH} levels; no field of the
 * struct named twice; each value of its field's JSON type; integers of 64 bits and finite
 * numbers throughout, skipped fields included; base64 in its one canonical spelling; a
 * float32 that the double Python reads rounds to without a tie. Values are read with the
 * Jackson calls Spark's JacksonParser makes for each type, except floats (rounded from the
 * double, as Python's value is) and bytes (Java's strict base64 decoder).
 */
public final class PayloadParser implements UDF1<byte[], Row> {
  private static final long serialVersionUID = 1L;
  // Jackson's defaults refuse what Python's JSON does: comments, single quotes, NaN tokens,
  // leading zeros. Its encoding detection is kept from ever choosing anything but UTF-8.
  private static final JsonFactory JSON = new JsonFactory();
  // Levels below the payload (the payload's own object is the first). Python refuses a line
  // past 128 levels; well inside that, nothing a plan reads needs more than two.
  static final int MAX_DEPTH = 64;
  // An integer is read into a double or float here only when it is exact in either, so that
  // every way of reading it agrees.
  private static final long EXACT_DOUBLE = 1L << 53;
  private static final long EXACT_FLOAT = 1L << 24;

  private final StructType type;
  private final Struct payload;

  /** {@code schemaJson}: the payload's struct type as Spark writes it ({@code DataType.json}). */
  public PayloadParser(String schemaJson) {
    this((StructType) DataType.fromJson(schemaJson), Collections.emptySet());
  }

  /** {@code refused}: keys that, in the payload's own object, make the line Python's. */
  PayloadParser(StructType type, Set<String> refused) {
    this.type = type;
    this.payload = new Struct(type, refused);
  }

  public StructType dataType() {
    return type;
  }

  @Override
  public Row call(byte[] text) {
    if (text == null || !plainUtf8(text)) {
      return null;
    }
    try (JsonParser parser = JSON.createParser(text)) {
      if (parser.nextToken() != JsonToken.START_OBJECT) {
        return null;
      }
      Row row = payload.read(parser, 1);
      return row != null && parser.nextToken() == null ? row : null;
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  /**
   * Valid UTF-8 (shortest forms only) with no surrogate, no NUL, no byte order mark and no
   * backslash-u escape. Jackson decodes an overlong form that Java's decoder (and so Spark's
   * text, and Python's) replaces; it reads a leading mark or NUL bytes as another encoding;
   * an escape may spell a lone surrogate, which Python refuses, or a key it treats apart.
   */
  static boolean plainUtf8(byte[] b) {
    int n = b.length;
    if (n >= 3 && (b[0] & 0xFF) == 0xEF && (b[1] & 0xFF) == 0xBB && (b[2] & 0xFF) == 0xBF) {
      return false;
    }
    for (int i = 0; i < n; i++) {
      int c = b[i];
      if (c >= 0) {
        if (c == 0) {
          return false;
        }
        if (c == '\\') {
          if (i + 1 < n && b[i + 1] == 'u') {
            return false;
          }
          i++; // the escaped character, a backslash included, starts no escape of its own
        }
        continue;
      }
      int lead = c & 0xFF;
      int more;
      int low = 0x80;
      int high = 0xBF;
      if (lead >= 0xC2 && lead <= 0xDF) {
        more = 1;
      } else if (lead >= 0xE0 && lead <= 0xEF) {
        more = 2;
        if (lead == 0xE0) {
          low = 0xA0; // shorter forms are overlong
        } else if (lead == 0xED) {
          high = 0x9F; // U+D800 to U+DFFF
        }
      } else if (lead >= 0xF0 && lead <= 0xF4) {
        more = 3;
        if (lead == 0xF0) {
          low = 0x90;
        } else if (lead == 0xF4) {
          high = 0x8F; // past U+10FFFF
        }
      } else {
        return false;
      }
      if (i + more >= n) {
        return false;
      }
      int second = b[i + 1] & 0xFF;
      if (second < low || second > high) {
        return false;
      }
      for (int k = 2; k <= more; k++) {
        if ((b[i + k] & 0xC0) != 0x80) {
          return false;
        }
      }
      i += more;
    }
    return true;
  }

  /** One struct of the type: its fields by name, read from an object's tokens. */
  private static final class Struct implements Serializable {
    private static final long serialVersionUID = 1L;
    private final DataType[] types;
    private final Struct[] structs;
    private final Map<String, Integer> index = new HashMap<>();
    private final Set<String> refused;

    Struct(StructType type, Set<String> refused) {
      this.refused = new HashSet<>(refused);
      StructField[] fields = type.fields();
      types = new DataType[fields.length];
      structs = new Struct[fields.length];
      for (int i = 0; i < fields.length; i++) {
        types[i] = fields[i].dataType();
        index.put(fields[i].name(), i);
        if (types[i] instanceof StructType) {
          structs[i] = new Struct((StructType) types[i], Collections.emptySet());
        }
      }
    }

    /** The object whose START_OBJECT was just read, at {@code depth}, or null. */
    Row read(JsonParser parser, int depth) throws IOException {
      Object[] values = new Object[types.length];
      boolean[] seen = new boolean[types.length];
      JsonToken token;
      while ((token = parser.nextToken()) == JsonToken.FIELD_NAME) {
        String name = parser.currentName();
        Integer i = index.get(name);
        token = parser.nextToken();
        if (i == null) {
          if (refused.contains(name)) {
            return null;
          }
          if (!skip(parser, token, depth)) {
            return null;
          }
          continue;
        }
        if (seen[i]) {
          return null; // both parsers take the last, but that is for Python to be sure of
        }
        seen[i] = true;
        if (token == JsonToken.VALUE_NULL) {
          continue;
        }
        Object value =
            structs[i] != null
                ? struct(parser, token, structs[i], depth + 1)
                : value(parser, token, types[i]);
        if (value == null) {
          return null;
        }
        values[i] = value;
      }
      return token == JsonToken.END_OBJECT ? RowFactory.create(values) : null;
    }

    private static Object struct(JsonParser parser, JsonToken token, Struct struct, int depth)
        throws IOException {
      return token == JsonToken.START_OBJECT && depth <= MAX_DEPTH ? struct.read(parser, depth) : null;
    }

    /**
     * Past the value starting at {@code token} (a field no plan reads, in an object at {@code
     * depth}); false if it holds what Python refuses: an integer past 64 bits, a number that is
     * not finite, nesting too deep.
     */
    private static boolean skip(JsonParser parser, JsonToken token, int depth) throws IOException {
      int open = 0;
      while (token != null) {
        if (token == JsonToken.START_OBJECT || token == JsonToken.START_ARRAY) {
          if (depth + ++open > MAX_DEPTH) {
            return false;
          }
        } else if (token == JsonToken.END_OBJECT || token == JsonToken.END_ARRAY) {
          open--;
        } else if (token == JsonToken.VALUE_NUMBER_INT) {
          if (parser.getNumberType() == JsonParser.NumberType.BIG_INTEGER) {
            return false;
          }
        } else if (token == JsonToken.VALUE_NUMBER_FLOAT) {
          if (!Double.isFinite(parser.getDoubleValue())) {
            return false;
          }
        }
        if (open == 0) {
          return true;
        }
        token = parser.nextToken();
      }
      return false;
    }

    private static Object value(JsonParser parser, JsonToken token, DataType type) throws IOException {
      boolean integral = token == JsonToken.VALUE_NUMBER_INT;
      boolean number = integral || token == JsonToken.VALUE_NUMBER_FLOAT;
      if (type instanceof StringType) {
        return token == JsonToken.VALUE_STRING ? parser.getText() : null;
      } else if (type instanceof LongType) {
        return integral ? (Object) parser.getLongValue() : null;
      } else if (type instanceof IntegerType) {
        return integral ? (Object) parser.getIntValue() : null;
      } else if (type instanceof ShortType) {
        return integral ? (Object) parser.getShortValue() : null;
      } else if (type instanceof DoubleType) {
        if (integral && !exact(parser, EXACT_DOUBLE)) {
          return null;
        }
        return number ? (Object) parser.getDoubleValue() : null;
      } else if (type instanceof FloatType) {
        if (integral && !exact(parser, EXACT_FLOAT)) {
          return null;
        }
        return number ? float32(parser.getDoubleValue()) : null;
      } else if (type instanceof BooleanType) {
        return token == JsonToken.VALUE_TRUE ? Boolean.TRUE : token == JsonToken.VALUE_FALSE ? Boolean.FALSE : null;
      } else if (type instanceof BinaryType) {
        return token == JsonToken.VALUE_STRING ? canonicalBase64(parser.getText()) : null;
      }
      return null; // a type no plan reads with
    }

    private static boolean exact(JsonParser parser, long limit) throws IOException {
      if (parser.getNumberType() == JsonParser.NumberType.BIG_INTEGER) {
        return false;
      }
      long value = parser.getLongValue();
      return value >= -limit && value <= limit;
    }

    /**
     * The float nearest the double {@code d}, unless {@code d} lies exactly halfway between two
     * floats: Python reads the double and its shortest text may round the other way.
     */
    private static Object float32(double d) {
      float f = (float) d;
      if ((double) f == d || Float.isInfinite(f)) {
        return f;
      }
      float other = d > f ? Math.nextUp(f) : Math.nextDown(f);
      return ((double) f + (double) other) / 2 == d ? null : (Object) f;
    }

    /**
     * The bytes of base64 text written the one way the bytes encode to (padded, no stray
     * bits): Python keeps the text of a bytes value as it is, the JVM lane writes the bytes'
     * encoding, so only then are the two the same.
     */
    private static byte[] canonicalBase64(String text) {
      byte[] bytes;
      try {
        bytes = Base64.getDecoder().decode(text);
      } catch (IllegalArgumentException e) {
        return null;
      }
      return Base64.getEncoder().encodeToString(bytes).equals(text) ? bytes : null;
    }
  }
}
