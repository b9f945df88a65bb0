// Java heap allocation sites with a known truth: byte arrays and objects of
// known sizes made in named methods, a share of them kept, the rest
// dropped, and a collection before the end. Prints what the JVM itself
// counted of each site (ThreadMXBean's allocated bytes of this thread: what
// the JIT left allocated), one array's size, how many were kept, and the
// sites' time (for bench/java_heap_bench.py).
//
//   java -cp DIR Alloc [COUNT] [BYTES] [GO_FILE]
//
// With GO_FILE it prints "ready" and waits for that file to exist before
// it allocates (a tracer attaches meanwhile).
import java.lang.management.ManagementFactory;
import java.util.ArrayList;

public class Alloc {
  static final ArrayList<Object> kept = new ArrayList<>();

  static final class Node {
    long a, b, c;  // 40 bytes with its header on a 64-bit JVM with compressed pointers
    Node next;
  }

  // COUNT arrays of BYTES each; every fourth kept.
  static void site_bytes(int count, int bytes) {
    for (int i = 0; i < count; i++) {
      byte[] b = new byte[bytes];
      b[i % bytes] = 1;
      if (i % 4 == 0) kept.add(b);
    }
  }

  // COUNT * 16 small objects in chains of 16; none kept.
  static void site_objects(int count) {
    for (int i = 0; i < count; i++) {
      Node head = null;
      for (int j = 0; j < 16; j++) {
        Node n = new Node();
        n.next = head;
        head = n;
      }
      if (head.next == null) System.out.print("");
    }
  }

  static com.sun.management.ThreadMXBean mx;
  static long siteBytes, siteObjects, loopNanos;
  static byte[] one;

  static void outer(int count, int bytes) {
    long start = System.nanoTime();
    long before = mx.getCurrentThreadAllocatedBytes();
    site_bytes(count, bytes);
    long between = mx.getCurrentThreadAllocatedBytes();
    site_objects(count);
    long after = mx.getCurrentThreadAllocatedBytes();
    siteBytes = between - before;
    siteObjects = after - between;
    loopNanos = System.nanoTime() - start;
  }

  public static void main(String[] args) {
    int count = args.length > 0 ? Integer.parseInt(args[0]) : 2000;
    int bytes = args.length > 1 ? Integer.parseInt(args[1]) : 102400;
    mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    if (args.length > 2) {
      System.out.println("ready " + ProcessHandle.current().pid());
      while (!new java.io.File(args[2]).exists()) {
        try {
          Thread.sleep(10);
        } catch (InterruptedException e) {
          return;
        }
      }
    }
    long before = mx.getCurrentThreadAllocatedBytes();
    one = new byte[bytes];
    long array = mx.getCurrentThreadAllocatedBytes() - before;
    outer(count, bytes);
    System.gc();
    System.out.println("site_bytes " + siteBytes + " site_objects " + siteObjects + " array " + array + " kept "
        + kept.size() + " loop_ns " + loopNanos);
  }
}
