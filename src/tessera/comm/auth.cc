// Job tokens and HMAC proofs over OpenSSL (RAND_bytes, HMAC, SHA256,
// CRYPTO_memcmp).
#include "tessera/comm/auth.h"

#include <cstring>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "tessera/base/check.h"

namespace tessera::comm {
namespace {

constexpr char kHex[] = "0123456789abcdef";

std::string Hex(const uint8_t* data, size_t n) {
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kHex[data[i] >> 4];
    out += kHex[data[i] & 15];
  }
  return out;
}

// resize + memcpy: GCC 12 -O3 -fPIC misreads the insert() of a string_view
// as an overflow (-Wstringop-overflow false positive).
void Append(Bytes& out, std::string_view text) {
  if (text.empty()) return;
  const size_t at = out.size();
  out.resize(at + text.size());
  std::memcpy(out.data() + at, text.data(), text.size());
}
void Append(Bytes& out, const Bytes& bytes) { out.insert(out.end(), bytes.begin(), bytes.end()); }

}  // namespace

StatusOr<Bytes> RandomBytes(size_t n) {
  Bytes out(n);
  if (n > 0 && RAND_bytes(out.data(), static_cast<int>(n)) != 1) {
    return Internal("OpenSSL RAND_bytes failed to produce {} random bytes (error {:#x})", n, ERR_get_error());
  }
  return out;
}

StatusOr<std::string> GenerateJobToken() {
  TESSERA_ASSIGN_OR_RETURN(Bytes raw, RandomBytes(32));
  return Hex(raw.data(), raw.size());
}

Bytes HmacSha256(std::string_view key, const Bytes& message) {
  Bytes mac(EVP_MAX_MD_SIZE);
  unsigned int len = 0;
  const uint8_t* result = HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), message.data(),
                               message.size(), mac.data(), &len);
  TESSERA_CHECK(result != nullptr && len == kMacBytes, "HMAC-SHA256 failed");
  mac.resize(len);
  return mac;
}

bool MacEqual(const Bytes& a, const Bytes& b) {
  if (a.size() != b.size() || a.empty()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Status ValidateJobToken(std::string_view token, std::string_view source) {
  if (token.empty()) return InvalidArgument("job token from {} is empty", source);
  if (token.size() < kMinTokenChars || token.size() > kMaxTokenChars) {
    return InvalidArgument("job token from {} has {} characters; it must have {} to {} (`tessera launch` generates "
                           "one; or use e.g. `openssl rand -hex 32`)",
                           source, token.size(), kMinTokenChars, kMaxTokenChars);
  }
  for (char c : token) {
    if (c <= ' ' || c > '~') {
      return InvalidArgument("job token from {} contains a space or non-printable character", source);
    }
  }
  return Status::Ok();
}

Bytes ClientProof(std::string_view token, const Bytes& server_nonce, const Bytes& client_nonce,
                  std::string_view client_info) {
  Bytes msg;
  Append(msg, std::string_view("tessera-client-v1"));
  Append(msg, server_nonce);
  Append(msg, client_nonce);
  Append(msg, client_info);
  return HmacSha256(token, msg);
}

Bytes ServerProof(std::string_view token, const Bytes& server_nonce, const Bytes& client_nonce) {
  Bytes msg;
  Append(msg, std::string_view("tessera-server-v1"));
  Append(msg, server_nonce);
  Append(msg, client_nonce);
  return HmacSha256(token, msg);
}

std::string DeriveJobToken(std::string_view secret, std::string_view context) {
  Bytes msg;
  Append(msg, std::string_view("tessera-derived-token-v1"));
  Append(msg, context);
  Bytes mac = HmacSha256(secret, msg);
  return Hex(mac.data(), mac.size());
}

std::string TokenFingerprint(std::string_view token) {
  uint8_t digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const uint8_t*>(token.data()), token.size(), digest);
  return Hex(digest, 4);
}

}  // namespace tessera::comm
