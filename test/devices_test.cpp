// Devices: the shared device test bodies over every place compiled in, and what only the
// OpenCL backend has (its context, queue, cl_mem buffers and device limits).
#include <boost/mp11/list.hpp>
#include <fluidk/devices/enabled.hpp>
#include <fluidk/tensor.hpp>

#if defined(FLUIDK_HAS_OPENCL) && FLUIDK_HAS_OPENCL
using test_places = boost::mp11::mp_list<fluidk::cpu, fluidk::opencl>;
#else
using test_places = boost::mp11::mp_list<fluidk::cpu>;
#endif

#include <cstddef>
#include <fluidk/device_memory_cache.hpp>
#include <set>

#include "device_test_bodies.hpp"

namespace {
// The buffers of a pretend device: handles are distinct addresses, and what the cache gives
// back to the device is recorded.
struct pretend_device {
  static inline std::multiset<void*> released;
  static inline int next = 0;
  static inline char bytes[64];
  static void release(int, void* handle) noexcept { released.insert(handle); }
  static void* make(std::size_t) { return &bytes[next++ % 64]; }
};
}  // namespace

TEST_CASE(
    "device_memory_cache: a freed buffer serves the next allocation of its size; the limit; out of memory",
    "[devices][memory_cache]") {
  using fluidk::device_memory_cache;
  pretend_device::released.clear();
  int made = 0;
  const auto make = [&](std::size_t n) {
    ++made;
    return pretend_device::make(n);
  };
  device_memory_cache cache(0, &pretend_device::release, 100);
  int waits = 0;
  const auto no_wait = [&] { ++waits; };

  void* a = cache.allocate(40, make, no_wait);
  void* b = cache.allocate(40, make, no_wait);
  void* c = cache.allocate(24, make, no_wait);
  CHECK(made == 3);
  cache.deallocate(a, 40);
  cache.deallocate(b, 40);
  CHECK(cache.stats() == device_memory_cache::statistics{3, 0, 0, 80, 2});
  // The same size: the one freed last, and no new buffer; another size: a new one.
  CHECK(cache.allocate(40, make, no_wait) == b);
  CHECK(cache.allocate(41, make, no_wait) != a);
  CHECK(made == 4);
  CHECK(cache.stats() == device_memory_cache::statistics{4, 1, 0, 40, 1});
  CHECK(pretend_device::released.empty());

  // Beyond the limit (100 bytes held free), the buffers freed first go back to the device.
  cache.deallocate(c, 24);  // 64 held: a, c
  cache.deallocate(b, 40);  // 104 held: a goes
  CHECK(pretend_device::released == std::multiset<void*>{a});
  CHECK(cache.stats().cached_bytes == 64);
  void* big = cache.allocate(101, make, no_wait);
  cache.deallocate(big, 101);  // more than the limit alone: straight back
  CHECK(pretend_device::released.count(big) == 1);
  CHECK(cache.stats().cached_buffers == 2);

  // Out of memory: the cache is emptied and the device asked once more.
  int refusals = 1;
  const auto tight = [&](std::size_t n) -> void* {
    return refusals-- > 0 ? nullptr : pretend_device::make(n);
  };
  void* d = cache.allocate(8, tight, no_wait);
  CHECK(d != nullptr);
  CHECK(waits == 1);  // between the emptying and the second try
  CHECK(cache.stats() == device_memory_cache::statistics{6, 1, 4, 0, 0});
  CHECK(pretend_device::released.count(b) == 1);
  CHECK(pretend_device::released.count(c) == 1);
  // Still out of memory, with nothing cached: nullptr, for the caller's error.
  const auto none = [](std::size_t) -> void* { return nullptr; };
  CHECK(cache.allocate(8, none, no_wait) == nullptr);
  CHECK(waits == 1);  // nothing cached: no second try
  CHECK(cache.stats().driver_allocations == 6);

  // Limit 0: nothing is held.
  cache.set_limit(0);
  cache.deallocate(d, 8);
  CHECK(pretend_device::released.count(d) == 1);
  CHECK(cache.stats() == device_memory_cache::statistics{6, 1, 5, 0, 0});
  cache.deallocate(nullptr, 8);
  CHECK(cache.stats().driver_releases == 5);
}

TEST_CASE("device_memory_cache gives what it holds back to the device when emptied and when destroyed",
          "[devices][memory_cache]") {
  using fluidk::device_memory_cache;
  pretend_device::released.clear();
  const auto make = [](std::size_t n) { return pretend_device::make(n); };
  void* kept = nullptr;
  {
    device_memory_cache cache(3, &pretend_device::release);
    CHECK(cache.limit() == device_memory_cache::default_limit);
    // The backends' limit: 1 GiB, or a quarter of the device's memory where that is less.
    static_assert(device_memory_cache::limit_for(0) == device_memory_cache::default_limit);
    static_assert(device_memory_cache::limit_for(std::size_t(8) << 30) == device_memory_cache::default_limit);
    static_assert(device_memory_cache::limit_for(std::size_t(2) << 30) == std::size_t(512) << 20);
    const auto no_wait = [] {};
    void* a = cache.allocate(16, make, no_wait);
    void* b = cache.allocate(16, make, no_wait);
    cache.deallocate(a, 16);
    cache.deallocate(b, 16);
    cache.empty();
    CHECK(pretend_device::released == std::multiset<void*>{a, b});
    CHECK(cache.stats().cached_bytes == 0);
    kept = cache.allocate(16, make, no_wait);
    cache.deallocate(kept, 16);
  }
  CHECK(pretend_device::released.count(kept) == 1);

  // abandon() forgets what it holds, giving nothing back (a device runtime gone at exit).
  pretend_device::released.clear();
  device_memory_cache cache(0, &pretend_device::release);
  cache.deallocate(cache.allocate(16, make, [] {}), 16);
  cache.abandon();
  CHECK(cache.stats().cached_buffers == 0);
  cache.empty();
  CHECK(pretend_device::released.empty());
}

TEST_CASE("device_memory_cache: a buffer taken again leaves the order of the others freed",
          "[devices][memory_cache]") {
  using fluidk::device_memory_cache;
  pretend_device::released.clear();
  const auto make = [](std::size_t n) { return pretend_device::make(n); };
  const auto no_wait = [] {};
  device_memory_cache cache(0, &pretend_device::release, 45);
  void* x = cache.allocate(10, make, no_wait);
  void* y = cache.allocate(10, make, no_wait);
  void* z = cache.allocate(30, make, no_wait);
  void* w = cache.allocate(30, make, no_wait);
  cache.deallocate(x, 10);
  cache.deallocate(y, 10);
  cache.deallocate(z, 30);  // 50 held: x goes
  CHECK(pretend_device::released == std::multiset<void*>{x});
  CHECK(cache.allocate(10, make, no_wait) == y);  // taken: out of the order too
  cache.deallocate(w, 30);                        // 60 held: z goes, then 30
  CHECK(pretend_device::released == std::multiset<void*>{x, z});
  CHECK(cache.stats() == device_memory_cache::statistics{4, 1, 2, 30, 1});
  CHECK(cache.allocate(30, make, no_wait) == w);
}

#if defined(FLUIDK_HAS_OPENCL) && FLUIDK_HAS_OPENCL

#include <string>
#include <utility>
#include <vector>

namespace {

std::vector<float> iota_floats(int n, float start = 0.0f) {
  std::vector<float> values(std::size_t(n), 0.0f);
  for (int i = 0; i < n; ++i) values[std::size_t(i)] = start + float(i);
  return values;
}

fluidk::Tensor host_tensor(const std::vector<float>& values) {
  fluidk::Tensor t({std::int64_t(values.size())}, fluidk::data_type::float32);
  for (std::size_t i = 0; i < values.size(); ++i) t.data<float>()[i] = values[i];
  return t;
}

std::vector<float> host_values(const fluidk::Tensor& t) {
  const fluidk::Tensor host = fluidk::copy_to(t, fluidk::cpu_place);
  return std::vector<float>(host.data<float>(), host.data<float>() + host.numel());
}

// A one-kernel program, released with the object.
class scale_program {
 public:
  explicit scale_program(const fluidk::opencl_context& context) {
    const char* source =
        "__kernel void scale(__global float* x, const float factor, const unsigned n) {\n"
        "  const size_t i = get_global_id(0);\n"
        "  if (i < n) x[i] *= factor;\n"
        "}\n";
    cl_int status = CL_SUCCESS;
    program_ = clCreateProgramWithSource(context.context(), 1, &source, nullptr, &status);
    REQUIRE(status == CL_SUCCESS);
    cl_device_id device = context.device();
    status = clBuildProgram(program_, 1, &device, "", nullptr, nullptr);
    REQUIRE(fluidk::opencl_error_name(status) == "CL_SUCCESS");
    kernel_ = clCreateKernel(program_, "scale", &status);
    REQUIRE(status == CL_SUCCESS);
  }
  scale_program(const scale_program&) = delete;
  scale_program& operator=(const scale_program&) = delete;
  ~scale_program() {
    if (kernel_ != nullptr) clReleaseKernel(kernel_);
    if (program_ != nullptr) clReleaseProgram(program_);
  }
  cl_kernel kernel() const { return kernel_; }

 private:
  cl_program program_ = nullptr;
  cl_kernel kernel_ = nullptr;
};

}  // namespace

TEST_CASE("the OpenCL context names its device and owns a working queue", "[devices][opencl]") {
  using namespace fluidk;
  REQUIRE(device_traits<opencl>::device_count() >= 1);
  auto& context = context_of<opencl>(0);
  CHECK(context.place() == parse_place("cl:0"));
  CHECK(context.context() != nullptr);
  CHECK(context.queue() != nullptr);
  CHECK(context.device() != nullptr);

  const std::string name = context.device_name();
  WARN("OpenCL device 0: " << name);
  CHECK_FALSE(name.empty());
  CHECK(name.find('\0') == std::string::npos);
  char platform_name[256] = {};
  REQUIRE(clGetPlatformInfo(context.platform(), CL_PLATFORM_NAME, sizeof platform_name - 1, platform_name,
                            nullptr) == CL_SUCCESS);
  if (std::string(platform_name) == "Portable Computing Language") {
    // PoCL names its CPU device after its driver and the host CPU: "pthread-<cpu>" (PoCL 3)
    // or "cpu-<cpu>" (later versions).
    CHECK((name.rfind("pthread-", 0) == 0 || name.rfind("cpu-", 0) == 0));
  }
  CHECK(context.max_alloc_bytes() > 0);

  // The queue is the context's own: the cl_command_queue reports this context and device.
  cl_context queue_context = nullptr;
  REQUIRE(clGetCommandQueueInfo(context.queue(), CL_QUEUE_CONTEXT, sizeof queue_context, &queue_context,
                                nullptr) == CL_SUCCESS);
  CHECK(queue_context == context.context());

  // A kernel run on the queue, on a tensor's cl_mem at its offset, sees what copy_to wrote.
  const std::vector<float> values = iota_floats(1000, 1.0f);
  Tensor t = copy_to(host_tensor(values), context.place());
  REQUIRE(t.offset() == 0);
  scale_program program(context);
  cl_mem buffer = static_cast<cl_mem>(t.handle());
  const float factor = 2.5f;
  const cl_uint n = cl_uint(values.size());
  REQUIRE(clSetKernelArg(program.kernel(), 0, sizeof buffer, &buffer) == CL_SUCCESS);
  REQUIRE(clSetKernelArg(program.kernel(), 1, sizeof factor, &factor) == CL_SUCCESS);
  REQUIRE(clSetKernelArg(program.kernel(), 2, sizeof n, &n) == CL_SUCCESS);
  const std::size_t global = 1024;
  REQUIRE(clEnqueueNDRangeKernel(context.queue(), program.kernel(), 1, nullptr, &global, nullptr, 0, nullptr,
                                 nullptr) == CL_SUCCESS);
  context.wait();
  const std::vector<float> scaled = host_values(t);
  REQUIRE(scaled.size() == values.size());
  for (std::size_t i = 0; i < values.size(); ++i) CHECK(scaled[i] == values[i] * factor);
}

TEST_CASE("device to device copies on opencl:0 move exactly the bytes asked for", "[devices][opencl]") {
  using namespace fluidk;
  const place where = place::of<opencl>(0);
  const std::vector<float> values = iota_floats(12);
  const Tensor a = copy_to(host_tensor(values), where);

  SECTION("into another tensor on the same device") {
    Tensor b({12}, data_type::float32, where);
    copy_into(b, a);
    CHECK_FALSE(b.shares_buffer_with(a));
    CHECK(host_values(b) == values);
    CHECK(host_values(a) == values);  // the source is never written
  }
  SECTION("between slices, into the middle of another buffer") {
    Tensor b = copy_to(host_tensor(std::vector<float>(12, -1.0f)), where);
    Tensor b_middle = b.slice(4, 8);
    copy_into(b_middle, a.slice(0, 4));
    const std::vector<float> expected{-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1};
    CHECK(host_values(b) == expected);
  }
  SECTION("onto itself") {
    Tensor d = copy_to(a, where);
    copy_into(d, d);
    CHECK(host_values(d) == values);
  }
  SECTION("between overlapping ranges of one buffer, as memmove would") {
    Tensor c = copy_to(a, where);
    Tensor c_tail = c.slice(2, 10);
    copy_into(c_tail, c.slice(0, 8));  // clEnqueueCopyBuffer refuses overlap: staged
    const std::vector<float> expected{0, 1, 0, 1, 2, 3, 4, 5, 6, 7, 10, 11};
    CHECK(host_values(c) == expected);
  }
}

TEST_CASE("OpenCL allocations check the device's limits and name the place", "[devices][opencl]") {
  using namespace fluidk;
  const place where = place::of<opencl>(0);
  CHECK(device_traits<opencl>::allocate(0, 0) == nullptr);
  device_traits<opencl>::deallocate(0, nullptr, 0);

  // Just over CL_DEVICE_MAX_MEM_ALLOC_SIZE: refused before OpenCL is asked, naming the limit.
  const std::size_t limit = context_of<opencl>(0).max_alloc_bytes();
  REQUIRE(limit > 0);
  try {
    Tensor t({std::int64_t(limit + 1)}, data_type::uint8, where);
    FAIL("allocation over CL_DEVICE_MAX_MEM_ALLOC_SIZE succeeded");
  } catch (const allocation_error& e) {
    CHECK(e.where() == where);
    CHECK(e.bytes() == limit + 1);
    CHECK_THAT(e.what(), Catch::Contains(std::to_string(limit + 1) + " bytes on Place(opencl:0)") &&
                             Catch::Contains("CL_DEVICE_MAX_MEM_ALLOC_SIZE"));
  }

  // A device that is not there: an allocation_error, not device_unavailable.
  const int missing = device_traits<opencl>::device_count();
  try {
    Tensor t({4}, data_type::float32, place::of<opencl>(missing));
    FAIL("allocation on a missing OpenCL device succeeded");
  } catch (const allocation_error& e) {
    CHECK(e.where() == place::of<opencl>(missing));
    CHECK(e.bytes() == 16);
    const std::string at = place::of<opencl>(missing).to_string();
    CHECK(std::string(e.what()) == "fluidk: cannot allocate 16 bytes on " + at + ": no device " + at + ": " +
                                       std::to_string(missing) + " device(s) of kind 'opencl' present");
  }
}

TEST_CASE("OpenCL buffers go back to the device's cache and serve the next tensor of their size",
          "[devices][opencl][memory_cache]") {
  using namespace fluidk;
  const place where = place::of<opencl>(0);
  device_memory_cache& cache = context_of<opencl>(0).memory_cache();
  const std::vector<float> first = iota_floats(1000), second = iota_floats(1000, 5000.0f);
  void* handle = nullptr;
  {
    const Tensor t = copy_to(host_tensor(first), where);
    handle = t.handle();
    CHECK(host_values(t) == first);
  }
  const device_memory_cache::statistics before = cache.stats();
  CHECK(before.cached_buffers >= 1);
  {
    // The buffer of that size freed last, written anew.
    const Tensor t = copy_to(host_tensor(second), where);
    CHECK(t.handle() == handle);
    CHECK(host_values(t) == second);
    const device_memory_cache::statistics now = cache.stats();
    CHECK(now.reuses == before.reuses + 1);
    CHECK(now.driver_allocations == before.driver_allocations);
  }
  // Emptied: clReleaseMemObject for each, and the next tensor of the size is a new buffer.
  cache.empty();
  CHECK(cache.stats().cached_buffers == 0);
  CHECK(cache.stats().driver_releases >= before.driver_releases + 1);
  const std::uint64_t made = cache.stats().driver_allocations;
  const Tensor t = copy_to(host_tensor(first), where);
  CHECK(cache.stats().driver_allocations == made + 1);
  CHECK(host_values(t) == first);
}

TEST_CASE("failed OpenCL copies name both places and the OpenCL error", "[devices][opencl]") {
  using namespace fluidk;
  const place where = place::of<opencl>(0);
  Tensor device({4}, data_type::float32, where);
  Tensor host({4}, data_type::float32);
  memory_ref past_end = device.memory();
  past_end.offset = 64;  // beyond the 16-byte buffer
  CHECK_THROWS_WITH(
      copy_bytes(past_end, host.memory(), 16),
      Catch::Contains("from Place(cpu) to Place(opencl:0)") && Catch::Contains("CL_INVALID_VALUE"));
  CHECK_THROWS_WITH(
      copy_bytes(host.memory(), past_end, 16),
      Catch::Contains("from Place(opencl:0) to Place(cpu)") && Catch::Contains("CL_INVALID_VALUE"));
  CHECK_THROWS_WITH(
      copy_bytes(device.memory(), past_end, 16),
      Catch::Contains("from Place(opencl:0) to Place(opencl:0)") && Catch::Contains("CL_INVALID_VALUE"));
}

TEST_CASE("OpenCL error codes print by name", "[devices][opencl]") {
  using fluidk::opencl_error_name;
  // The names are kept by number in the header; here they are checked against <CL/cl.h>.
#define FLUIDK_TEST_CL_CODE(code) std::pair<cl_int, std::string>(code, #code)
  const std::pair<cl_int, std::string> codes[] = {
      FLUIDK_TEST_CL_CODE(CL_SUCCESS),
      FLUIDK_TEST_CL_CODE(CL_DEVICE_NOT_FOUND),
      FLUIDK_TEST_CL_CODE(CL_DEVICE_NOT_AVAILABLE),
      FLUIDK_TEST_CL_CODE(CL_COMPILER_NOT_AVAILABLE),
      FLUIDK_TEST_CL_CODE(CL_MEM_OBJECT_ALLOCATION_FAILURE),
      FLUIDK_TEST_CL_CODE(CL_OUT_OF_RESOURCES),
      FLUIDK_TEST_CL_CODE(CL_OUT_OF_HOST_MEMORY),
      FLUIDK_TEST_CL_CODE(CL_PROFILING_INFO_NOT_AVAILABLE),
      FLUIDK_TEST_CL_CODE(CL_MEM_COPY_OVERLAP),
      FLUIDK_TEST_CL_CODE(CL_IMAGE_FORMAT_MISMATCH),
      FLUIDK_TEST_CL_CODE(CL_IMAGE_FORMAT_NOT_SUPPORTED),
      FLUIDK_TEST_CL_CODE(CL_BUILD_PROGRAM_FAILURE),
      FLUIDK_TEST_CL_CODE(CL_MAP_FAILURE),
      FLUIDK_TEST_CL_CODE(CL_MISALIGNED_SUB_BUFFER_OFFSET),
      FLUIDK_TEST_CL_CODE(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST),
      FLUIDK_TEST_CL_CODE(CL_COMPILE_PROGRAM_FAILURE),
      FLUIDK_TEST_CL_CODE(CL_LINKER_NOT_AVAILABLE),
      FLUIDK_TEST_CL_CODE(CL_LINK_PROGRAM_FAILURE),
      FLUIDK_TEST_CL_CODE(CL_DEVICE_PARTITION_FAILED),
      FLUIDK_TEST_CL_CODE(CL_KERNEL_ARG_INFO_NOT_AVAILABLE),
      FLUIDK_TEST_CL_CODE(CL_INVALID_VALUE),
      FLUIDK_TEST_CL_CODE(CL_INVALID_DEVICE_TYPE),
      FLUIDK_TEST_CL_CODE(CL_INVALID_PLATFORM),
      FLUIDK_TEST_CL_CODE(CL_INVALID_DEVICE),
      FLUIDK_TEST_CL_CODE(CL_INVALID_CONTEXT),
      FLUIDK_TEST_CL_CODE(CL_INVALID_QUEUE_PROPERTIES),
      FLUIDK_TEST_CL_CODE(CL_INVALID_COMMAND_QUEUE),
      FLUIDK_TEST_CL_CODE(CL_INVALID_HOST_PTR),
      FLUIDK_TEST_CL_CODE(CL_INVALID_MEM_OBJECT),
      FLUIDK_TEST_CL_CODE(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR),
      FLUIDK_TEST_CL_CODE(CL_INVALID_IMAGE_SIZE),
      FLUIDK_TEST_CL_CODE(CL_INVALID_SAMPLER),
      FLUIDK_TEST_CL_CODE(CL_INVALID_BINARY),
      FLUIDK_TEST_CL_CODE(CL_INVALID_BUILD_OPTIONS),
      FLUIDK_TEST_CL_CODE(CL_INVALID_PROGRAM),
      FLUIDK_TEST_CL_CODE(CL_INVALID_PROGRAM_EXECUTABLE),
      FLUIDK_TEST_CL_CODE(CL_INVALID_KERNEL_NAME),
      FLUIDK_TEST_CL_CODE(CL_INVALID_KERNEL_DEFINITION),
      FLUIDK_TEST_CL_CODE(CL_INVALID_KERNEL),
      FLUIDK_TEST_CL_CODE(CL_INVALID_ARG_INDEX),
      FLUIDK_TEST_CL_CODE(CL_INVALID_ARG_VALUE),
      FLUIDK_TEST_CL_CODE(CL_INVALID_ARG_SIZE),
      FLUIDK_TEST_CL_CODE(CL_INVALID_KERNEL_ARGS),
      FLUIDK_TEST_CL_CODE(CL_INVALID_WORK_DIMENSION),
      FLUIDK_TEST_CL_CODE(CL_INVALID_WORK_GROUP_SIZE),
      FLUIDK_TEST_CL_CODE(CL_INVALID_WORK_ITEM_SIZE),
      FLUIDK_TEST_CL_CODE(CL_INVALID_GLOBAL_OFFSET),
      FLUIDK_TEST_CL_CODE(CL_INVALID_EVENT_WAIT_LIST),
      FLUIDK_TEST_CL_CODE(CL_INVALID_EVENT),
      FLUIDK_TEST_CL_CODE(CL_INVALID_OPERATION),
      FLUIDK_TEST_CL_CODE(CL_INVALID_GL_OBJECT),
      FLUIDK_TEST_CL_CODE(CL_INVALID_BUFFER_SIZE),
      FLUIDK_TEST_CL_CODE(CL_INVALID_MIP_LEVEL),
      FLUIDK_TEST_CL_CODE(CL_INVALID_GLOBAL_WORK_SIZE),
      FLUIDK_TEST_CL_CODE(CL_INVALID_PROPERTY),
      FLUIDK_TEST_CL_CODE(CL_INVALID_IMAGE_DESCRIPTOR),
      FLUIDK_TEST_CL_CODE(CL_INVALID_COMPILER_OPTIONS),
      FLUIDK_TEST_CL_CODE(CL_INVALID_LINKER_OPTIONS),
      FLUIDK_TEST_CL_CODE(CL_INVALID_DEVICE_PARTITION_COUNT),
  };
#undef FLUIDK_TEST_CL_CODE
  for (const auto& [code, name] : codes) CHECK(opencl_error_name(code) == name);
  CHECK(opencl_error_name(-1001) == "CL_PLATFORM_NOT_FOUND_KHR");
  CHECK(opencl_error_name(-9999) == "CL error -9999");
}

// What happens without any OpenCL platform (device_count() == 0, context_of throws
// device_unavailable, allocate throws allocation_error) is not tested: the ICD loader cannot
// be made to find no platform from inside this process.

#endif
