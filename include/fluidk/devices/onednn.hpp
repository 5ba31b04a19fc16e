// oneDNN: a compute library on the CPU place (not a place of its own). Gives kernels an
// engine and a stream, and describes fluidk tensors to oneDNN as memory objects; its library
// tag and layouts are in fluidk/devices/onednn_tags.hpp, included here. Needs
// FLUIDK_HAS_ONEDNN, which Meson's fluidk_onednn_dep defines.
#pragma once

#if !defined(FLUIDK_HAS_ONEDNN) || !FLUIDK_HAS_ONEDNN
#error \
    "fluidk/devices/onednn.hpp needs the oneDNN backend: use fluidk_onednn_dep (Meson), or define FLUIDK_HAS_ONEDNN=1 and link dnnl"
#else

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <dnnl.hpp>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <typeinfo>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fluidk/content_stamp.hpp"
#include "fluidk/devices/onednn_tags.hpp"
#include "fluidk/tensor.hpp"

namespace fluidk {

// What the oneDNN kernels make once and keep, as Fluid's MKLDNN device context keeps its
// blobs: primitives with their descriptors, keyed by what defines them (shapes, attributes,
// layouts, post-ops), and weights reordered into a primitive's format, kept while their
// source is unchanged. A prepared weight is stamped as the executor's transfer cache stamps
// its copies (tensor_stamp: the storage's identity and version, offset, data type, layout and
// shape), so a weight written in place, through any alias, is prepared again, never served
// stale. Bounded: at most max_entries entries and max_prepared_bytes bytes of prepared
// weights, least recently used first out; and a weight whose source storage is destroyed (a
// model unloaded) is dropped at the cache's next use (detail/gone_notice.hpp). Thread-safe: a mutex guards
// the maps, and what they hand out is immutable and shared (a primitive executes on several streams at once;
// a prepared weight is only read). An entry is made outside the lock: two threads that miss the same key at
// once both make it, and the last one made is kept.
class onednn_cache {
 public:
  struct statistics {
    std::uint64_t hits = 0, misses = 0;                    // primitives and other kept objects
    std::uint64_t prepared_hits = 0, prepared_misses = 0;  // weights prepared
    std::uint64_t evictions = 0;
    std::uint64_t dropped = 0;  // prepared weights whose source storage was destroyed
  };

  explicit onednn_cache(std::size_t max_entries = 4096, std::size_t max_prepared_bytes = std::size_t(1) << 30)
      : max_entries_(max_entries), max_prepared_bytes_(max_prepared_bytes) {}
  onednn_cache(const onednn_cache&) = delete;
  onednn_cache& operator=(const onednn_cache&) = delete;

  // The object kept under `key`, made by make() (which returns a T) on a miss. A key names
  // one type: keys begin with the kind of object they describe ("conv2d.fwd|...").
  template <class T, class Make>
  std::shared_ptr<const T> get(const std::string& key, Make&& make) {
    {
      const std::lock_guard lock(mutex_);
      drop_gone_locked();
      if (auto it = entries_.find(key); it != entries_.end()) {
        if (it->second.type != &typeid(T))
          throw error("oneDNN cache: key \"" + key + "\" was made for another type of object");
        touch(it);
        ++stats_.hits;
        return std::static_pointer_cast<const T>(it->second.value);
      }
      ++stats_.misses;
    }
    auto value = std::make_shared<const T>(std::forward<Make>(make)());
    insert(key, value, &typeid(T), {}, 0, nullptr);
    return value;
  }

  // `source` prepared for a use that `key` names (a primitive's weights format): make()
  // returns the prepared memory on a miss, or when source's content changed since it was
  // made. The entry is the source storage's and the key's; its stamp decides whether it is
  // still the source's content.
  template <class Make>
  dnnl::memory prepared(const Tensor& source, const std::string& key, Make&& make) {
    std::string full = key;
    full += "|source ";
    full += std::to_string(source.storage_id());
    full += '+';
    full += std::to_string(source.offset());
    {
      const std::lock_guard lock(mutex_);
      drop_gone_locked();
      if (auto it = entries_.find(full); it != entries_.end()) {
        if (it->second.stamp.matches(source)) {
          touch(it);
          ++stats_.prepared_hits;
          return *std::static_pointer_cast<const dnnl::memory>(it->second.value);
        }
        erase(it);
      }
      ++stats_.prepared_misses;
    }
    tensor_stamp stamp(source);  // before make(): a write while it runs makes the entry stale
    dnnl::memory memory = std::forward<Make>(make)();
    const std::size_t bytes = memory.get_desc().get_size();
    insert(full, std::make_shared<const dnnl::memory>(memory), &typeid(dnnl::memory), std::move(stamp), bytes,
           &source);
    return memory;
  }

  statistics stats() const {
    const std::lock_guard lock(mutex_);
    return stats_;
  }
  std::size_t size() const {
    const std::lock_guard lock(mutex_);
    return entries_.size();
  }
  std::size_t prepared_bytes() const {
    const std::lock_guard lock(mutex_);
    return prepared_bytes_;
  }
  // Drops the prepared weights of the source storages destroyed since the last call (every
  // get and prepared call does so first); size() and prepared_bytes() count them until then.
  void drop_gone() {
    const std::lock_guard lock(mutex_);
    drop_gone_locked();
  }
  void clear() {
    const std::lock_guard lock(mutex_);
    entries_.clear();
    lru_.clear();
    by_source_.clear();
    prepared_bytes_ = 0;
    gone_.unwatch_all();
  }

 private:
  struct entry {
    std::shared_ptr<const void> value;
    const std::type_info* type;
    tensor_stamp stamp;    // a prepared weight's source; empty for other objects
    std::size_t bytes;     // a prepared weight's
    std::uint64_t source;  // a prepared weight's source storage_id(); 0 for other objects
    std::list<std::string>::iterator position;
  };
  using map = std::unordered_map<std::string, entry>;

  void touch(map::iterator it) { lru_.splice(lru_.begin(), lru_, it->second.position); }
  map::iterator erase(map::iterator it) {
    if (const std::uint64_t source = it->second.source; source != 0) {
      gone_.unwatch(source);
      if (const auto keys = by_source_.find(source); keys != by_source_.end()) {
        std::erase(keys->second, &it->first);
        if (keys->second.empty()) by_source_.erase(keys);
      }
    }
    prepared_bytes_ -= it->second.bytes;
    lru_.erase(it->second.position);
    return entries_.erase(it);
  }
  // The entries of the sources told gone, under the lock (detail/gone_notice.hpp: the lock of
  // the storages' lists is not held then): a lookup per source, whatever the cache holds.
  void drop_gone_locked() {
    if (!gone_.any()) [[likely]]
      return;
    for (const std::uint64_t id : gone_.take()) {
      const auto keys = by_source_.find(id);
      if (keys == by_source_.end()) continue;
      const std::vector<const std::string*> dropped = std::move(keys->second);
      by_source_.erase(keys);
      for (const std::string* key : dropped) {
        ++stats_.dropped;
        erase(entries_.find(*key));
      }
    }
  }
  void insert(const std::string& key, std::shared_ptr<const void> value, const std::type_info* type,
              tensor_stamp stamp, std::size_t bytes, const Tensor* source) {
    const std::lock_guard lock(mutex_);
    if (source != nullptr) source->watch_storage(gone_);
    if (auto it = entries_.find(key); it != entries_.end()) erase(it);
    // The source's slot in the index, with room for this key, made first: once the entry is
    // in, nothing below throws.
    const std::uint64_t id = source != nullptr ? source->storage_id() : 0;
    std::vector<const std::string*>* keys = nullptr;
    if (id != 0) {
      keys = &by_source_[id];
      try {
        keys->reserve(keys->size() + 1);
      } catch (...) {
        if (keys->empty()) by_source_.erase(id);
        throw;
      }
    }
    map::iterator made;
    bool listed = false;
    try {
      lru_.push_front(key);
      listed = true;
      made = entries_.emplace(key, entry{std::move(value), type, std::move(stamp), bytes, id, lru_.begin()})
                 .first;
    } catch (...) {
      if (listed) lru_.pop_front();  // no key in the list without its entry
      if (keys != nullptr && keys->empty()) by_source_.erase(id);
      throw;
    }
    if (keys != nullptr) keys->push_back(&made->first);
    prepared_bytes_ += bytes;
    while ((entries_.size() > max_entries_ || prepared_bytes_ > max_prepared_bytes_) && lru_.size() > 1) {
      erase(entries_.find(lru_.back()));
      ++stats_.evictions;
    }
  }

  std::size_t max_entries_, max_prepared_bytes_;
  mutable std::mutex mutex_;
  std::list<std::string> lru_;  // most recently used first
  map entries_;
  // The keys of each source's prepared weights (the map's own keys, which stay where they are).
  std::unordered_map<std::uint64_t, std::vector<const std::string*> > by_source_;
  std::size_t prepared_bytes_ = 0;
  statistics stats_;
  // Last: out of the storages' lists before the entries go (the cache is never moved).
  detail::gone_list<detail::buffer> gone_;
};

// The oneDNN engine and stream of the CPU place. A stream is not thread-safe, so each
// thread has its own context; every context shares the one CPU engine and, unless given one
// of its own, the process's cache (shared_cache()), so that a primitive or a prepared weight
// made on one thread serves all (oneDNN runs a primitive only on a stream of its engine).
// A primitive shared so must be created with dnnl::scratchpad_mode::user and run with the
// running context's scratchpad(): with the library's own scratchpad, two threads running one
// primitive at once share its temporary buffers (oneDNN 2.6 built without concurrent
// execution, as Debian's is) and compute wrong results.
class onednn_context final : public device_context {
 public:
  onednn_context() : onednn_context(shared_cache()) {}
  explicit onednn_context(onednn_cache& cache) : engine_(shared_engine()), stream_(engine_), cache_(&cache) {}
  fluidk::place place() const noexcept override { return cpu_place; }
  void wait() override { stream_.wait(); }

  const dnnl::engine& engine() const noexcept { return engine_; }
  dnnl::stream& stream() noexcept { return stream_; }
  onednn_cache& cache() const noexcept { return *cache_; }

  // This context's scratchpad for a primitive created with dnnl::scratchpad_mode::user: memory
  // of description `d` over a buffer of the context's own, grown as needed and reused by each
  // primitive run on this context (one at a time: a context is one thread's).
  dnnl::memory scratchpad(const dnnl::memory::desc& d) {
    const std::size_t bytes = d.get_size();
    if (bytes > scratchpad_bytes_) {
      // oneDNN allocates it, aligned as its code wants its scratchpads.
      scratchpad_ = dnnl::memory(dnnl::memory::desc({dnnl::memory::dim(bytes)}, dnnl::memory::data_type::u8,
                                                    dnnl::memory::format_tag::a),
                                 engine_);
      scratchpad_bytes_ = bytes;
    }
    return dnnl::memory(d, engine_, scratchpad_.get_data_handle());
  }

  static onednn_context& this_thread() {
    thread_local onednn_context context;
    return context;
  }
  static onednn_cache& shared_cache() {
    static onednn_cache cache;
    return cache;
  }
  static const dnnl::engine& shared_engine() {
    static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    return engine;
  }

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
  onednn_cache* cache_;
  dnnl::memory scratchpad_;  // scratchpad_bytes_ of oneDNN's memory, or none yet
  std::size_t scratchpad_bytes_ = 0;
};

inline dnnl::memory::data_type onednn_data_type(data_type d) {
  switch (d) {
    case data_type::float32:
      return dnnl::memory::data_type::f32;
    case data_type::float16:
      return dnnl::memory::data_type::f16;
    case data_type::bfloat16:
      return dnnl::memory::data_type::bf16;
    case data_type::int8:
      return dnnl::memory::data_type::s8;
    case data_type::uint8:
      return dnnl::memory::data_type::u8;
    case data_type::int32:
      return dnnl::memory::data_type::s32;
    default:
      break;
  }
  throw error("oneDNN has no data type for " + std::string(name_of(d)));
}

inline dnnl::memory::format_tag onednn_format(data_layout l) {
  using tag = dnnl::memory::format_tag;
  if (l == data_layout::nchw) return tag::nchw;
  if (l == data_layout::nhwc) return tag::nhwc;
  if (l == data_layout_of<layout::nChw8c>) return tag::nChw8c;
  if (l == data_layout_of<layout::nChw16c>) return tag::nChw16c;
  if (l == data_layout_of<layout::nc>) return tag::nc;
  throw error("layout " + std::string(name_of(l)) +
              " has no oneDNN format; give the tensor a concrete layout");
}

// A oneDNN memory object over a host tensor's storage (no copy).
inline dnnl::memory onednn_memory(const Tensor& t, const dnnl::engine& engine) {
  if (!t.place().is<cpu>())
    throw error("oneDNN works on " + cpu_place.to_string() + ", not on " + t.describe());
  const dnnl::memory::dims shape(t.dims().begin(), t.dims().end());
  const dnnl::memory::desc desc(shape, onednn_data_type(t.dtype()), onednn_format(t.layout()));
  return dnnl::memory(desc, engine, static_cast<std::byte*>(t.handle()) + t.offset());
}

}  // namespace fluidk

#endif  // the backend's feature macro
