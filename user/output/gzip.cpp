#include "output/gzip.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>

namespace allocscope {
namespace {

// zlib streams, ended with their owner.
// The fastest level, as Go's runtime/pprof writes: the agent compresses
// every profile it serves, and the default level took three times as long
// for some 4 % fewer bytes.
struct Deflater {
  z_stream z{};
  bool ready = deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK;
  Deflater() = default;
  Deflater(const Deflater&) = delete;
  Deflater& operator=(const Deflater&) = delete;
  ~Deflater() {
    if (ready) deflateEnd(&z);
  }
};
struct Inflater {
  z_stream z{};
  bool ready = inflateInit2(&z, 15 + 16) == Z_OK;
  Inflater() = default;
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;
  ~Inflater() {
    if (ready) inflateEnd(&z);
  }
};

}  // namespace

Result<std::string> gzip(std::string_view raw) {
  Deflater d;
  if (!d.ready) return fail("gzip: out of memory", ENOMEM);
  z_stream& z = d.z;
  std::string out(deflateBound(&z, raw.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&z, Z_FINISH);  // one call: the buffer holds the worst case
  out.resize(z.total_out);
  if (rc != Z_STREAM_END) return fail("gzip: compression failed");
  return out;
}

Result<std::string> gunzip(std::string_view gz, size_t max_bytes) {
  Inflater inflater;
  if (!inflater.ready) return fail("gzip: out of memory", ENOMEM);
  z_stream& z = inflater.z;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  std::string out;
  int rc = Z_OK;
  bool over = false;
  while (rc == Z_OK) {
    char buf[1 << 16];
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof buf;
    rc = inflate(&z, Z_NO_FLUSH);
    size_t produced = sizeof buf - z.avail_out;
    // Checked before the memory is taken: a small bomb never grows the string
    // past the bound, nor does its doubling capacity.
    if (out.size() + produced > max_bytes) {
      over = true;
      break;
    }
    if (out.capacity() < out.size() + produced)
      out.reserve(std::min(max_bytes, std::max(out.size() + produced, 2 * out.capacity())));
    out.append(buf, produced);
  }
  std::string cause = over                ? "over " + std::to_string(max_bytes >> 20) + " MiB uncompressed"
                      : rc == Z_BUF_ERROR ? "truncated"
                      : z.msg             ? z.msg
                                          : "corrupt";
  if (over || rc != Z_STREAM_END) return fail("gzip: " + cause);
  return out;
}

}  // namespace allocscope
