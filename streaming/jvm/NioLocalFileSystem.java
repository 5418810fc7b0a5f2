package flinkwatch.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system (checksums included) that sets a file's mode in the JVM.
 *
 * <p>Without Hadoop's native library (pyspark ships none), RawLocalFileSystem runs
 * {@code chmod} in a new process for every file it creates and every directory it makes:
 * each checkpoint file of a micro-batch (offsets, commits, state changelogs and their
 * {@code .crc} files) is a process started from the driver's JVM. Java's own
 * {@code Files.setPosixFilePermissions} is the same chmod(2) without the process.
 * Spark uses it through {@code spark.hadoop.fs.file.impl} (streaming/session.py).
 */
public class NioLocalFileSystem extends LocalFileSystem {

  public NioLocalFileSystem() {
    super(new Raw());
  }

  /** The raw (checksum-less) file system underneath, with the in-JVM chmod. */
  public static class Raw extends RawLocalFileSystem {
    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      Files.setPosixFilePermissions(pathToFile(p).toPath(), modes(permission.toShort()));
    }
  }

  private static final PosixFilePermission[] BITS = {
    PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE,
    PosixFilePermission.OTHERS_READ, PosixFilePermission.GROUP_EXECUTE,
    PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
    PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE,
    PosixFilePermission.OWNER_READ,
  };

  /** The nine permission bits of a mode (the sticky bit is not a POSIX permission here). */
  static Set<PosixFilePermission> modes(short mode) {
    Set<PosixFilePermission> out = EnumSet.noneOf(PosixFilePermission.class);
    for (int i = 0; i < BITS.length; i++) {
      if ((mode & (1 << i)) != 0) {
        out.add(BITS[i]);
      }
    }
    return out;
  }
}
