// Native memory from compiled Java code, for naming JIT frames from the
// JVM's own perf map (jcmd PID Compiler.perfmap). directSite takes COUNT
// direct buffers of BYTES each: ByteBuffer.allocateDirect calls
// Unsafe.allocateMemory0, whose os::malloc calls malloc(BYTES) (native
// memory tracking off, the default). Warmed up first by the same calls, so
// that the JIT has compiled it before the map is written: with C1 alone and
// compiles waited for, its code stays as it is (C2 would recompile it, and
// deoptimize it where it meets a path the warm-up never took).
//
//   java -XX:+PreserveFramePointer -XX:TieredStopAtLevel=1 -Xbatch -cp DIR DirectSites GO_FILE QUIT_FILE
//
// Prints "ready" once warm, allocates when GO_FILE exists, prints
// "done BYTES", and exits when QUIT_FILE exists.
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;

public class DirectSites {
  static long sink;

  static void directSite(int count, int bytes) {
    for (int i = 0; i < count; i++) {
      ByteBuffer b = ByteBuffer.allocateDirect(bytes);
      sink += b.capacity();
    }
  }

  static void await(Path file) throws InterruptedException {
    while (!Files.exists(file)) Thread.sleep(10);
  }

  static void rounds(int rounds, int count, int bytes) {
    for (int r = 0; r < rounds; r++) {
      directSite(count, bytes);
      System.gc();  // the buffers' cleaners free their memory
    }
  }

  public static void main(String[] args) throws Exception {
    final int count = 40, bytes = 65536;
    rounds(300, count, bytes);  // warm: the same calls, compiled once (-Xbatch)
    System.out.println("ready");
    System.out.flush();
    await(Path.of(args[0]));
    final int measured = 100;
    rounds(measured, count, bytes);
    System.out.println("done " + (long) measured * count * bytes);
    System.out.flush();
    await(Path.of(args[1]));
  }
}
