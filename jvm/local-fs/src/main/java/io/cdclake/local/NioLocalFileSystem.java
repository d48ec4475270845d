package io.cdclake.local;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermissions;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's checksummed local file system, setting permissions with java.nio.
 *
 * <p>Without Hadoop's native library, {@link RawLocalFileSystem#setPermission} forks {@code
 * chmod} for every file and directory it creates. The bits set are the same: owner, group and
 * others' read, write and execute; the sticky bit, which Java cannot set, is left as the file
 * has it (Spark and Hudi set none on local files).
 */
public class NioLocalFileSystem extends LocalFileSystem {
  public NioLocalFileSystem() {
    super(new Raw());
  }

  /** The raw (unchecksummed) layer under {@link NioLocalFileSystem}. */
  public static class Raw extends RawLocalFileSystem {
    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      // Without the sticky bit, Hadoop spells a permission as ls does ("rwxr-x--x").
      String rwx = new FsPermission((short) (permission.toShort() & 0777)).toString();
      Files.setPosixFilePermissions(pathToFile(p).toPath(), PosixFilePermissions.fromString(rwx));
    }
  }
}
