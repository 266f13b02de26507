// thread_pool.h — a fork-join pool for the CPU ops (the calling thread is worker 0).
//
// Decode issues hundreds of small parallel ops per token, so dispatch latency matters more than
// fairness: workers spin briefly on a generation counter before sleeping on a condition variable,
// the way ggml's threadpool does. run() is not re-entrant; one pool serves one model step at a time.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace gaacrt::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);  // total threads, the caller included; <= 0 means all cores
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(ith, nth) once on each of the nth threads and returns when all have finished.
  template <typename F>
  void run(F&& fn) {
    if (n_threads_ == 1) { fn(0, 1); return; }
    dispatch(&invoke<F>, &fn);
  }

  // Splits [0, n) into contiguous chunks, one per thread: fn(begin, end).
  template <typename F>
  void parallel_for(int64_t n, F&& fn) {
    run([&](int ith, int nth) {
      const int64_t per = (n + nth - 1) / nth;
      const int64_t b = per * ith, e = b + per < n ? b + per : n;
      if (b < e) fn(b, e);
    });
  }

  static int default_threads();  // physical-ish core count (hardware_concurrency)

 private:
  using Task = void (*)(void* ctx, int ith, int nth);
  template <typename F>
  static void invoke(void* ctx, int ith, int nth) { (*static_cast<F*>(ctx))(ith, nth); }
  void dispatch(Task task, void* ctx);
  void worker(int ith);

  int n_threads_;
  std::vector<std::thread> threads_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  Task task_ = nullptr;
  void* ctx_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> sleepers_{0};
};

}  // namespace gaacrt::cpu
