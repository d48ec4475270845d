package io.cdclake.merge;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.io.Serializable;
import java.util.HashMap;
import java.util.Map;
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
 * head's plan gives (jvm_parse.py): the same values Spark's {@code from_json} reads, at a
 * quarter of its cost, because Jackson reads the bytes themselves (from_json decodes each
 * row's text through a new InputStreamReader) and no per-object setup of Spark's runs.
 *
 * <p>Null means "not certain": the line goes to the Python parser, which decides it. So the
 * reader takes only what it is sure of, and is stricter than from_json wherever the two could
 * differ: the bytes must be valid UTF-8 without surrogates, the payload one JSON object with
 * nothing after it, no field of the struct named twice, and each value of its field's JSON
 * type (from_json writes a number read as text as its JSON, Python refuses it). Values are
 * read with the Jackson calls Spark's JacksonParser makes for each type.
 */
public final class PayloadParser implements UDF1<byte[], Row> {
  private static final long serialVersionUID = 1L;
  // Jackson's defaults are Python's: no comments, single quotes, NaN tokens or leading zeros.
  private static final JsonFactory JSON = new JsonFactory();

  private final StructType type;
  private final Struct payload;

  /** {@code schemaJson}: the payload's struct type as Spark writes it ({@code DataType.json}). */
  public PayloadParser(String schemaJson) {
    this.type = (StructType) DataType.fromJson(schemaJson);
    this.payload = new Struct(type);
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
      Row row = payload.read(parser);
      return row != null && parser.nextToken() == null ? row : null;
    } catch (IOException | RuntimeException e) {
      return null;
    }
  }

  /**
   * Valid UTF-8 (shortest forms only) with no surrogate, raw or escaped. Jackson decodes an
   * overlong form that Java's decoder (and so Spark's text, and Python's) replaces, and
   * Python refuses a lone surrogate that Jackson reads.
   */
  static boolean plainUtf8(byte[] b) {
    int n = b.length;
    for (int i = 0; i < n; i++) {
      int c = b[i];
      if (c >= 0) {
        if (c == '\\' && i + 2 < n && b[i + 1] == 'u' && (b[i + 2] | 0x20) == 'd') {
          return false; // a \\uDxxx escape: a surrogate's first hex digit is D
        }
        if (c == '\\') {
          i++; // an escaped backslash must not start an escape of its own
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

    Struct(StructType type) {
      StructField[] fields = type.fields();
      types = new DataType[fields.length];
      structs = new Struct[fields.length];
      for (int i = 0; i < fields.length; i++) {
        types[i] = fields[i].dataType();
        index.put(fields[i].name(), i);
        if (types[i] instanceof StructType) {
          structs[i] = new Struct((StructType) types[i]);
        }
      }
    }

    /** The object whose START_OBJECT was just read, or null. */
    Row read(JsonParser parser) throws IOException {
      Object[] values = new Object[types.length];
      boolean[] seen = new boolean[types.length];
      JsonToken token;
      while ((token = parser.nextToken()) == JsonToken.FIELD_NAME) {
        Integer i = index.get(parser.currentName());
        token = parser.nextToken();
        if (i == null) {
          parser.skipChildren();
          continue;
        }
        if (seen[i]) {
          return null; // both parsers take the last, but that is for Python to be sure of
        }
        seen[i] = true;
        if (token == JsonToken.VALUE_NULL) {
          continue;
        }
        Object value = structs[i] != null ? struct(parser, token, structs[i]) : value(parser, token, types[i]);
        if (value == null) {
          return null;
        }
        values[i] = value;
      }
      return token == JsonToken.END_OBJECT ? RowFactory.create(values) : null;
    }

    private static Object struct(JsonParser parser, JsonToken token, Struct struct) throws IOException {
      return token == JsonToken.START_OBJECT ? struct.read(parser) : null;
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
        return number ? (Object) parser.getDoubleValue() : null;
      } else if (type instanceof FloatType) {
        return number ? (Object) parser.getFloatValue() : null;
      } else if (type instanceof BooleanType) {
        return token == JsonToken.VALUE_TRUE ? Boolean.TRUE : token == JsonToken.VALUE_FALSE ? Boolean.FALSE : null;
      } else if (type instanceof BinaryType) {
        return token == JsonToken.VALUE_STRING ? parser.getBinaryValue() : null;
      }
      return null; // a type no plan reads with
    }
  }
}
