// Job tokens and the HMAC-SHA256 challenge-response that authenticates every
// connection to the rendezvous store (and that transports may reuse).
//
// Handshake (both directions prove knowledge of the token; the token itself
// never crosses the wire):
//   server -> client  server_nonce (32 random bytes)
//   client -> server  client_nonce, client_info,
//                     ClientProof = HMAC(token, "tessera-client-v1" ||
//                                        server_nonce || client_nonce || client_info)
//   server -> client  ServerProof = HMAC(token, "tessera-server-v1" ||
//                                        server_nonce || client_nonce)
// Proofs are compared with CRYPTO_memcmp (constant time). Never log a token:
// log TokenFingerprint() instead. All functions are thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "tessera/base/status.h"
#include "tessera/comm/store.h"

namespace tessera::comm {

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kMacBytes = 32;  // SHA-256
inline constexpr size_t kMinTokenChars = 16;
inline constexpr size_t kMaxTokenChars = 1024;

// A fresh job token: 64 lowercase hex characters from 32 bytes of
// OpenSSL's CSPRNG. Fails only if the CSPRNG fails.
StatusOr<std::string> GenerateJobToken();

// `n` cryptographically random bytes.
StatusOr<Bytes> RandomBytes(size_t n);

// HMAC-SHA256(key, message).
Bytes HmacSha256(std::string_view key, const Bytes& message);

// Constant-time equality of two MACs (false if the sizes differ).
bool MacEqual(const Bytes& a, const Bytes& b);

// OK if `token` is usable: kMinTokenChars..kMaxTokenChars printable
// non-space ASCII characters. `source` names where it came from
// ("TESSERA_JOB_TOKEN", "--token") for the error message.
Status ValidateJobToken(std::string_view token, std::string_view source);

// The proofs of the handshake above.
Bytes ClientProof(std::string_view token, const Bytes& server_nonce, const Bytes& client_nonce,
                  std::string_view client_info);
Bytes ServerProof(std::string_view token, const Bytes& server_nonce, const Bytes& client_nonce);

// A token derived from a per-job secret some launcher already hands every
// rank: hex(HMAC-SHA256(secret, "tessera-derived-token-v1" || context)).
std::string DeriveJobToken(std::string_view secret, std::string_view context);

// First 8 hex characters of SHA-256(token): safe to log, enough to tell
// two jobs' tokens apart.
std::string TokenFingerprint(std::string_view token);

}  // namespace tessera::comm
