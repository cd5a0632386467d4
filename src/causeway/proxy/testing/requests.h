// IFRT proxy requests as jaxlib's client builds them, for the proxy's tests
// and its fuzzer.
#ifndef CAUSEWAY_PROXY_TESTING_REQUESTS_H_
#define CAUSEWAY_PROXY_TESTING_REQUESTS_H_

#include <cstdint>

#include "causeway/proxy/ifrt_convert.h"
#include "causeway/proxy/proto/ifrt_service.pb.h"

namespace causeway::proxy::testing {

// The sharding of an array on `device` alone, serialized as jaxlib's
// client sends it.
inline xla::ifrt::ShardingProto SingleDeviceSharding(int32_t device) {
  xla::ifrt::SingleDeviceShardingProto single;
  single.set_device_id(device);
  xla::ifrt::ShardingProto sharding;
  sharding.mutable_serialized_sharding()->set_type_name(
      kSingleDeviceShardingTypeName);
  sharding.mutable_serialized_sharding()->set_data(single.SerializeAsString());
  return sharding;
}

// Makes array `array`, f32[elements] on `device`, of host buffer `buffer`.
inline xla::ifrt::proxy::IfrtRequest MakeArrayRequest(uint64_t array, int32_t device,
                                                      uint64_t buffer,
                                                      int64_t elements) {
  xla::ifrt::proxy::IfrtRequest request;
  auto* make = request.mutable_make_array_from_host_buffer_request();
  make->mutable_dtype()->set_kind(xla::ifrt::DTypeProto::KIND_F32);
  make->mutable_shape()->add_dims(elements);
  *make->mutable_sharding() = SingleDeviceSharding(device);
  make->set_host_buffer_handle(buffer);
  make->set_array_handle(array);
  return request;
}

// Copies array `array` into host buffer `buffer`.
inline xla::ifrt::proxy::IfrtRequest CopyToHostBufferRequest(uint64_t array,
                                                             uint64_t buffer) {
  xla::ifrt::proxy::IfrtRequest request;
  request.mutable_copy_to_host_buffer_request()->set_array_handle(array);
  request.mutable_copy_to_host_buffer_request()->set_host_buffer_handle(buffer);
  return request;
}

}  // namespace causeway::proxy::testing

#endif  // CAUSEWAY_PROXY_TESTING_REQUESTS_H_
