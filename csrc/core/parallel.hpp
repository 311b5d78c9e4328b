// Python-free helpers for running independent work items on a small pool of threads.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

namespace rapidscore {

// A thread count above this is a typo or an attack, not a machine (rapidscore.threads.MAX_THREADS).
constexpr int kMaxThreads = 1024;

// Number of worker threads to use: n_threads <= 0 means "all hardware threads"; never above
// kMaxThreads (the bindings refuse larger counts with a clear error before getting here).
inline int resolve_threads(int n_threads) {
    if (n_threads > 0) return std::min(n_threads, kMaxThreads);
    unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : static_cast<int>(std::min<unsigned>(hw, kMaxThreads));
}

// Calls fn(i) for i in [0, n) on up to n_threads threads, handing out items in chunks
// through an atomic counter so uneven items balance. The first exception thrown by any
// worker is rethrown in the caller after all threads have joined; remaining work is skipped.
//
// Starting a thread can fail (std::system_error: thread or memory limits, e.g. under ulimit -v).
// The calling thread is itself a worker and the work is handed out dynamically, so the call then
// simply runs on the threads that did start (at worst on the caller alone): the result is the
// same, only slower. A failure to start threads never escapes (an escaping exception with
// joinable threads alive would call std::terminate).
template <typename Fn>
void parallel_for(std::size_t n, int n_threads, Fn&& fn, std::size_t min_items_per_thread = 1) {
    if (n == 0) return;
    std::size_t threads = static_cast<std::size_t>(resolve_threads(n_threads));
    threads = std::min(threads, std::max<std::size_t>(1, n / std::max<std::size_t>(1, min_items_per_thread)));
    if (threads <= 1) {
        for (std::size_t i = 0; i < n; ++i) fn(i);
        return;
    }
    const std::size_t chunk = std::max<std::size_t>(1, n / (threads * 8));
    std::atomic<std::size_t> next{0};
    std::atomic<bool> failed{false};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto worker = [&]() {
        while (!failed.load(std::memory_order_relaxed)) {
            std::size_t begin = next.fetch_add(chunk);
            if (begin >= n) break;
            std::size_t end = std::min(n, begin + chunk);
            try {
                for (std::size_t i = begin; i < end; ++i) fn(i);
            } catch (...) {
                std::lock_guard<std::mutex> lock(error_mutex);
                if (!error) error = std::current_exception();
                failed.store(true);
            }
        }
    };
    std::vector<std::thread> pool;
    try {
        pool.reserve(threads - 1);
    } catch (const std::bad_alloc&) {
        // no room for the handles: the caller does all the work below
    }
    for (std::size_t t = 0; t + 1 < threads && pool.size() < pool.capacity(); ++t) {
        try {
            pool.emplace_back(worker);
        } catch (const std::system_error&) {
            break;  // thread limit reached: run on the threads started so far
        } catch (const std::bad_alloc&) {
            break;
        }
    }
    worker();
    for (auto& th : pool) th.join();
    if (error) std::rethrow_exception(error);
}

}  // namespace rapidscore
