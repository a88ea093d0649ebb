// The emulator's stream, event, capture and graph calls: streams defer their work
// until something waits for it (state.cpp runs the queues), events mark a
// stream's op count, and a capture records a stream's ops into a graph that each
// launch queues again.
#include "cudaemu/state.hpp"

#include "cudaemu/emulator.hpp"

#include <cuda_runtime_api.h>

#include <memory>
#include <utility>

// The CUDA calls below are the emulator's interface; what they use is its own.
using namespace cudaemu::detail;

extern "C" {

// ---- streams and events -----------------------------------------------------------

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  if (stream == nullptr) return fail(cudaErrorInvalidValue);
  State& st = state();
  std::lock_guard lock(st.mutex);
  auto* s = new CUstream_st();  // owned by the handle until cudaStreamDestroy
  s->device = current_device();
  s->blocking = (flags & cudaStreamNonBlocking) == 0;
  st.add(s);
  *stream = s;
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  State& st = state();
  std::lock_guard lock(st.mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr || s->legacy) {
    return fail(cudaErrorInvalidResourceHandle);
  }
  if (capturing(s)) return fail(cudaErrorStreamCaptureUnsupported);
  run_all(s);  // queued work still completes
  std::erase(st.streams, s);
  delete s;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  State& st = state();
  std::lock_guard lock(st.mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (capturing(s)) return fail(cudaErrorStreamCaptureUnsupported);
  if (s->legacy) {
    run_legacy_and_blocking(s->device);
  } else {
    run_all(s);
  }
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  State& st = state();
  std::lock_guard lock(st.mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (capturing(s)) return fail(cudaErrorStreamCaptureUnsupported);
  // Work runs only when waited for: a query answers "not ready" while any is queued.
  return s->pending.empty() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (event == nullptr) return fail(cudaErrorInvalidValue);
  auto* e = new CUevent_st();  // owned by the handle until cudaEventDestroy
  e->state->timing = (flags & cudaEventDisableTiming) == 0;
  *event = e;
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  delete event;  // queued records keep the state alive
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  State& st = state();
  std::lock_guard lock(st.mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  // Events inside a capture (a graph's fork and join) are not emulated: refused, so a
  // test that would need them says so instead of passing without them.
  if (capturing(s)) return fail(cudaErrorStreamCaptureUnsupported);
  std::shared_ptr<EventState> es = event->state;
  es->reached = false;
  if (const cudaError_t e = cudaemu::enqueue(stream,
                                             [es] {
                                               es->when = Clock::now();
                                               es->reached = true;
                                             });
      e != cudaSuccess) {
    return e;
  }
  es->stream = s->id;
  es->seq = s->enqueued;
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  State& st = state();
  std::lock_guard lock(st.mutex);
  const std::shared_ptr<EventState>& es = event->state;
  if (es->stream != 0) run_until(es->stream, es->seq);
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
  State& st = state();
  std::lock_guard lock(st.mutex);
  const EventState& es = *event->state;
  return es.stream == 0 || es.reached ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  if (event == nullptr || flags != 0) return fail(cudaErrorInvalidValue);
  State& st = state();
  std::lock_guard lock(st.mutex);
  const EventState& es = *event->state;
  if (CUstream_st* s = resolve(stream); s != nullptr && capturing(s)) {
    return fail(cudaErrorStreamCaptureIsolation);  // an event recorded outside the capture
  }
  if (es.stream == 0) return cudaSuccess;  // never recorded: nothing to wait for
  const std::uint64_t source = es.stream;
  const std::uint64_t upto = es.seq;
  return cudaemu::enqueue(stream, [source, upto] { run_until(source, upto); });
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (ms == nullptr || start == nullptr || end == nullptr) return fail(cudaErrorInvalidValue);
  State& st = state();
  std::lock_guard lock(st.mutex);
  const EventState& a = *start->state;
  const EventState& b = *end->state;
  if (!a.timing || !b.timing) return fail(cudaErrorInvalidResourceHandle);
  if (!a.reached || !b.reached) return fail(cudaErrorNotReady);
  *ms = std::chrono::duration<float, std::milli>(b.when - a.when).count();
  return cudaSuccess;
}

// ---- stream capture and graphs ------------------------------------------------------

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  State& st = state();
  std::lock_guard lock(st.mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (s->legacy) return fail(cudaErrorStreamCaptureImplicit);  // CUDA refuses the legacy stream
  if (s->capture != nullptr) return fail(cudaErrorIllegalState);
  run_all(s);  // what was queued before the capture is not part of it
  s->capture = new CUgraph_st();
  s->capture_mode = mode;
  s->capture_invalidated = false;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (graph == nullptr) return fail(cudaErrorInvalidValue);
  State& st = state();
  std::lock_guard lock(st.mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  if (s->capture == nullptr) return fail(cudaErrorIllegalState);
  std::unique_ptr<CUgraph_st> captured(std::exchange(s->capture, nullptr));
  *graph = nullptr;
  if (s->capture_invalidated) return fail(cudaErrorStreamCaptureInvalidated);
  *graph = captured.release();
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (status == nullptr) return fail(cudaErrorInvalidValue);
  State& st = state();
  std::lock_guard lock(st.mutex);
  CUstream_st* s = resolve(stream);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle);
  *status = s->capture == nullptr    ? cudaStreamCaptureStatusNone
            : s->capture_invalidated ? cudaStreamCaptureStatusInvalidated
                                     : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long /*flags*/) {
  if (exec == nullptr || graph == nullptr) return fail(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->ops};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (exec == nullptr) return fail(cudaErrorInvalidValue);
  State& st = state();
  std::lock_guard lock(st.mutex);
  for (const std::function<void()>& op : exec->ops) {
    if (const cudaError_t e = cudaemu::enqueue(stream, op); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;  // queued launches hold copies of its ops
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

}  // extern "C"
