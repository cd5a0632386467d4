// Certificates for TLS tests, made with openssl at run time in a fresh
// directory removed afterwards: self-signed ones, and ones signed by a CA
// made here, each for 127.0.0.1 and localhost.
#ifndef CAUSEWAY_TRANSPORT_TESTING_CERTIFICATES_H_
#define CAUSEWAY_TRANSPORT_TESTING_CERTIFICATES_H_

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "causeway/transport/grpc_common.h"

namespace causeway::transport::testing {

class Certificates {
 public:
  Certificates() {
    dir_ = std::filesystem::temp_directory_path() /
           absl::StrCat("cw_tls_", getpid(), "_", RandomUint64());
    std::filesystem::create_directories(dir_);
  }
  ~Certificates() { std::filesystem::remove_all(dir_); }
  Certificates(const Certificates&) = delete;
  Certificates& operator=(const Certificates&) = delete;

  // Makes a self-signed key and certificate named `name`; false if
  // openssl failed.
  bool Make(const std::string& name) {
    const std::string command = absl::StrCat(
        "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=", name,
        " -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout ",
        Key(name), " -out ", Cert(name), " >/dev/null 2>&1");
    return std::system(command.c_str()) == 0;
  }
  // Makes a key and a certificate named `name` signed by the CA `ca` (made
  // with Make); false if openssl failed.
  bool MakeSigned(const std::string& name, const std::string& ca) {
    const std::string extensions = (dir_ / (name + ".ext")).string();
    FILE* file = std::fopen(extensions.c_str(), "w");
    if (file == nullptr) return false;
    std::fputs("subjectAltName=IP:127.0.0.1,DNS:localhost\n", file);
    std::fclose(file);
    const std::string csr = (dir_ / (name + ".csr")).string();
    const std::string command = absl::StrCat(
        "openssl req -newkey rsa:2048 -nodes -subj /CN=", name, " -keyout ",
        Key(name), " -out ", csr, " >/dev/null 2>&1 && openssl x509 -req -in ",
        csr, " -CA ", Cert(ca), " -CAkey ", Key(ca),
        " -CAcreateserial -days 1 -extfile ", extensions, " -out ", Cert(name),
        " >/dev/null 2>&1");
    return std::system(command.c_str()) == 0;
  }
  std::string Key(const std::string& name) const {
    return (dir_ / (name + ".key")).string();
  }
  std::string Cert(const std::string& name) const {
    return (dir_ / (name + ".pem")).string();
  }

 private:
  std::filesystem::path dir_;
};

}  // namespace causeway::transport::testing

#endif  // CAUSEWAY_TRANSPORT_TESTING_CERTIFICATES_H_
