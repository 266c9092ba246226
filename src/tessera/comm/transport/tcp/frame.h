// Wire format of the tcp transport's streams, the link counters and the
// test-only fault hook.
//   - Every frame starts with a 64-byte FrameHeader. Data frames (on the
//     data streams) carry one chunk of a message; control frames (on the
//     pair's dedicated control stream, header only) carry acknowledgements
//     (ACK: cumulative count of messages fully received), retransmission
//     requests (NACK: message, offset, length) and give-up notices (FAIL).
//   - With checksums on, `checksum` is XXH3-64 of the payload and
//     `header_sum` XXH3-64 of the header's first 56 bytes. A payload that
//     fails its checksum is NACKed and resent; a header that fails its
//     checksum desynchronizes the stream, which is then re-established.
//   - `frame_no` numbers the data frames of one stream (per direction), so
//     both sides of a re-established stream agree on where to resume.
// Counters and the hook are process-wide and thread-safe (atomics).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::comm::transport::tcp {

constexpr uint16_t kFrameMagic = 0x4654;  // "TF"
enum FrameType : uint8_t { kFrameData = 1, kFrameAck = 2, kFrameNack = 3, kFrameFail = 4 };
enum FrameFlags : uint8_t { kFlagChecksum = 1, kFlagRetransmit = 2 };

struct FrameHeader {
  uint16_t magic = 0;
  uint8_t type = 0;
  uint8_t flags = 0;
  uint32_t tag = 0;
  uint64_t seq = 0;            // message sequence number (per direction)
  uint64_t message_bytes = 0;  // data: the message's size
  uint64_t offset = 0;         // data, NACK, FAIL: the chunk's offset
  uint32_t payload_bytes = 0;  // data: bytes following; NACK, FAIL: the chunk's length
  uint32_t frame_no = 0;       // data: this stream's frame number; FAIL: attempts
  uint64_t ack = 0;            // messages of the peer fully received (cumulative)
  uint64_t checksum = 0;       // XXH3 of the payload
  uint64_t header_sum = 0;     // XXH3 of the 56 bytes above
};
static_assert(sizeof(FrameHeader) == 64);

// XXH3-64 (seed 0; the value base::Checksum64 gives), compiled inline for
// this build's ISA: about 3x the shared library's generic SSE2 build on
// cache-hot frames (AVX2: 37 vs 12 GB/s on 512 KiB), which is what keeps
// checksums cheap enough to be on by default.
uint64_t FrameChecksum(const void* data, size_t bytes);

// A frame's payload fails its checksum this many times more: DataLoss.
constexpr int kMaxRetransmits = 8;

// Process-wide link counters (all tcp contexts; tests read deltas).
struct LinkStats {
  uint64_t corrupt_frames = 0;  // payload or header checksum mismatches seen by receivers
  uint64_t retransmits = 0;     // frames resent on a NACK
  uint64_t reconnects = 0;      // streams re-established after a drop
  uint64_t resent_frames = 0;   // frames resent after a reconnect
  // Data-frame bytes (headers included) written on data stream i
  // (i < kStatStreams; higher streams count in the last slot): how the
  // dynamic chunk assignment spread messages over the streams.
  static constexpr int kStatStreams = 16;
  uint64_t stream_bytes[kStatStreams] = {};
};
LinkStats GetLinkStats();

// Test-only fault injection: when set, called for every outgoing data frame
// (after its checksum is computed) with the sending rank, the peer, the
// stream index and the header; the action is applied to that frame on the
// wire only (the sender's data stays intact). nullptr clears it.
enum class FrameFault { kNone, kFlipBit, kShutdownStream };
using FrameFaultHook = FrameFault (*)(int rank, int peer, int stream, const FrameHeader& header);
void SetFrameFaultHookForTesting(FrameFaultHook hook);

// Test-only slow channel: when set, called when a data stream could take
// a new frame (sending rank, peer, stream index); a positive result is that
// stream's rate in bytes per second: after starting a frame of n bytes it
// takes no other frame for n / rate seconds (other streams take the
// chunks meanwhile). 0: unpaced. nullptr clears it.
using StreamPaceHook = double (*)(int rank, int peer, int stream);
void SetStreamPaceHookForTesting(StreamPaceHook hook);

namespace internal {
FrameFaultHook FrameFaultHookNow();
StreamPaceHook StreamPaceHookNow();
void CountStreamBytes(size_t stream, uint64_t bytes);
void CountCorrupt();
void CountRetransmit();
void CountReconnect();
void CountResent(uint64_t frames);
}  // namespace internal

}  // namespace tessera::comm::transport::tcp
