/* bench_load: a load generator that holds many virtual clients against one
 * coordinator, each a state machine over gRPC's asynchronous C core (a few
 * threads, one `next` completion queue each), and reports round times and
 * per-method RPC latencies. Usage: bench/load.sh, or
 *
 *   bench_load --server 127.0.0.1:PORT --enroll-token-file PATH
 *              [--clients 10000] [--threads 2] [--train-ms 0] ...
 *
 * Each virtual client: Register, CheckIn (long poll), on a task GetModel by
 * chunks (compared with, or added to, its thread's one copy of the model,
 * whose digest is checked once; or hashed on its own),
 * "train" (a timer of --train-ms), Upload an fp32
 * update (or Report for an evaluation task), CheckIn again; RetryLater waits
 * on a timer; FederationDone ends it. */
#include <errno.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "checksum.h"
#include "clock.h"
#include "codec.h"
#include "cohort_status.h"
#include "crypto.h"
#include "flags.h"
#include "pb.h"
#include "pb_iov.h"
#include "proc_mem.h"
#include "rpc_absl.h"
#include "rpc_args.h"
#include "rpc_client.h"
#include "rpc_status.h"
#include "sign.h"

/* A coordinator may not make a virtual client accept more than this. */
#define MAX_MODEL_BYTES (1024u * 1024u * 1024u)
/* File descriptors kept free for gRPC's own (epoll, eventfd, wakeups) and
 * stdio beyond one socket per connection. */
#define FD_HEADROOM 64
/* Retry backoff after a failed call: full jitter up to this doubling bound. */
#define BACKOFF_INITIAL_MS 200
#define BACKOFF_MAX_MS 5000
/* Failed attempts at one GetModel, Upload or Report chunk before the client
 * drops the task and checks in again. */
#define MAX_CALL_ATTEMPTS 6
/* Refusals of a Register (not transport errors) before a client gives up. */
#define MAX_REGISTER_REFUSALS 3
/* Error details written to stderr, over the whole run. */
#define MAX_LOGGED_ERRORS 10
#define N_STATUS RPC_STATUS_COUNT       /* gRPC status codes 0..16 */
#define STATUS_LOCAL N_STATUS           /* the call could not be started */
#define STATUS_BAD_REPLY (N_STATUS + 1) /* malformed or inconsistent reply */
#define STATUS_DIGEST (N_STATUS + 2)    /* model does not match its digest */
#define N_ERR (N_STATUS + 3)

static struct {
  const char *server, *token_file;
  long clients, connections, threads, wait_ms, train_ms, register_rate;
  long duration_s, rpc_timeout_ms, examples, held_ms, progress_s;
  long register_first, prefault_mb, upload_chunk_kb, download_chunk_kb;
} g_opt;

#define NUM(x) (double)(x)
static const flag_def FLAGS[] = {
    {"server", FLAG_STRING, &g_opt.server, "127.0.0.1:50051", 0, 0, "HOST:PORT",
     "the coordinator"},
    {"enroll-token-file", FLAG_STRING, &g_opt.token_file, NULL, 0, 0, "PATH",
     "file whose first line is the enrollment token (required)"},
    {"clients", FLAG_INT, &g_opt.clients, "10000", 1, NUM(1000000), "N",
     "virtual clients"},
    {"connections", FLAG_INT, &g_opt.connections, "0", 0, NUM(1000000), "C",
     "gRPC channels, each with its own TCP connection; client i uses "
     "channel i mod C (0: one per client)"},
    {"threads", FLAG_INT, &g_opt.threads, "2", 1, 256, "T",
     "threads, each with one completion queue"},
    {"wait-ms", FLAG_INT, &g_opt.wait_ms, "30000", 0, NUM(3600000), "MS",
     "CheckIn long poll (CheckInRequest.wait_ms); the call's deadline is "
     "this plus 30 s"},
    {"train-ms", FLAG_INT, &g_opt.train_ms, "0", 0, NUM(3600000), "MS",
     "simulated training time, a timer that blocks nothing"},
    {"register-rate", FLAG_INT, &g_opt.register_rate, "64", 1, NUM(100000), "R",
     "registrations in flight at once, over all threads"},
    {"duration-s", FLAG_INT, &g_opt.duration_s, "3600", 1, NUM(864000), "S",
     "stop after this long even if the federation is not done"},
    {"rpc-timeout-ms", FLAG_INT, &g_opt.rpc_timeout_ms, "30000", 100,
     NUM(3600000), "MS", "deadline of every call but CheckIn"},
    {"examples", FLAG_INT, &g_opt.examples, "100", 1, NUM(1000000000), "N",
     "num_examples each client reports"},
    {"held-ms", FLAG_INT, &g_opt.held_ms, "1000", 1, NUM(3600000), "MS",
     "a CheckIn answered after this long counts as a held long poll"},
    {"register-first", FLAG_INT, &g_opt.register_first, "1", 0, 1, "0|1",
     "1: no client checks in before every client has registered, so the "
     "rounds run with the whole fleet connected"},
    {"prefault-mb", FLAG_INT, &g_opt.prefault_mb, "0", 0, NUM(65536), "MB",
     "touch this much heap before the first client connects, and keep it "
     "(one malloc arena, no trimming): the page faults of a heap growing "
     "through the first rounds would take CPU from a coordinator on the "
     "same machine (bench/load.sh sizes it from the model)"},
    {"upload-chunk-kb", FLAG_INT, &g_opt.upload_chunk_kb, "0", 0, 1024, "KB",
     "upload in chunks of at most this many KiB (0: the task's maximum, "
     "1 MiB); libcohort's clients send 256"},
    {"download-chunk-kb", FLAG_INT, &g_opt.download_chunk_kb, "0", 0, 1024,
     "KB",
     "download the model in chunks of at most this many KiB (0: 1 MiB, the "
     "most the coordinator sends); libcohort's clients ask for 256"},
    {"progress-s", FLAG_INT, &g_opt.progress_s, "10", 0, 3600, "S",
     "a progress line on stderr this often (0: none)"},
};
#define N_FLAGS (sizeof FLAGS / sizeof FLAGS[0])

static const char USAGE[] =
    "usage: bench_load --server HOST:PORT --enroll-token-file PATH [options]\n"
    "\n"
    "Connects --clients virtual clients to one coordinator over --connections\n"
    "gRPC channels from --threads threads, runs them until the federation is\n"
    "done or --duration-s passes, then prints per-round lines, RPC latency\n"
    "percentiles per method and a `key value` summary after \"== summary\".";

/* Makes mb MiB of heap resident before any thread starts, and keeps it:
 * later allocations, on any thread, reuse it instead of faulting fresh
 * pages in (which costs 10-15 us each on a virtual machine with shadow
 * page tables). One arena, since a thread's own arena would start empty;
 * no trimming, or the touched pages would go back; blocks under 4 MiB
 * from the heap, since the default lets the mmap threshold drift. */
static void prefault_heap(long mb) {
  if (mb <= 0)
    return;
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  enum { BLOCK = 1 << 20 };
  /* Called through a volatile pointer, the writes cannot be optimised
   * away with the blocks, nor malloc and memset turned into a calloc
   * that knows fresh pages are zero and touches none. */
  static void *(*volatile touch)(void *, int, size_t) = memset;
  size_t n = (size_t)mb;
  void **blocks = calloc(n, sizeof *blocks);
  if (!blocks)
    return;
  for (size_t i = 0; i < n; i++) {
    blocks[i] = malloc(BLOCK - 64); /* under the threshold with its header */
    if (!blocks[i])
      break;
    touch(blocks[i], 1, BLOCK - 64);
  }
  for (size_t i = 0; i < n; i++)
    free(blocks[i]);
  free(blocks);
}

/* ---- latency histograms: 64 sub-buckets per power of two (<1.6% error) */

#define HIST_SUB 64
#define HIST_BUCKETS (36 * HIST_SUB)

typedef struct hist {
  uint64_t n, max_us;
  uint32_t b[HIST_BUCKETS];
} hist;

static size_t hist_index(uint64_t us) {
  if (us < HIST_SUB)
    return (size_t)us;
  int e = 63 - __builtin_clzll(us); /* >= 6 */
  size_t i = (size_t)(e - 5) * HIST_SUB + ((us >> (e - 6)) & (HIST_SUB - 1));
  return i < HIST_BUCKETS ? i : HIST_BUCKETS - 1;
}

static double hist_bucket_mid_us(size_t i) {
  if (i < HIST_SUB)
    return (double)i;
  int e = (int)(i / HIST_SUB) + 5;
  double lo = (double)((HIST_SUB + i % HIST_SUB) << (e - 6));
  return lo + (double)(1ull << (e - 6)) / 2;
}

static void hist_add(hist *h, uint64_t us) {
  h->b[hist_index(us)]++;
  h->n++;
  if (us > h->max_us)
    h->max_us = us;
}

static void hist_merge(hist *into, const hist *h) {
  for (size_t i = 0; i < HIST_BUCKETS; i++)
    into->b[i] += h->b[i];
  into->n += h->n;
  if (h->max_us > into->max_us)
    into->max_us = h->max_us;
}

/* The q-quantile in milliseconds (0 when empty). */
static double hist_quantile_ms(const hist *h, double q) {
  if (!h->n)
    return 0;
  uint64_t rank = (uint64_t)ceil(q * (double)h->n), seen = 0;
  if (rank < 1)
    rank = 1;
  for (size_t i = 0; i < HIST_BUCKETS; i++) {
    seen += h->b[i];
    if (seen >= rank) {
      double v = hist_bucket_mid_us(i);
      return (v > (double)h->max_us ? (double)h->max_us : v) / 1000.0;
    }
  }
  return (double)h->max_us / 1000.0;
}

/* ---- what is measured ---- */

enum method { M_REGISTER, M_CHECKIN, M_GETMODEL, M_UPLOAD, M_REPORT, N_M };
static const char *const METHOD_NAME[N_M] = {"register", "checkin", "getmodel",
                                             "upload", "report"};
static const char *const METHOD_PATH[N_M] = {
    PB_METHOD_REGISTER, PB_METHOD_CHECKIN, PB_METHOD_GETMODEL, PB_METHOD_UPLOAD,
    PB_METHOD_REPORT};
static const ProtobufCMessageDescriptor *const METHOD_REPLY[N_M] = {
    &cohort__v1__register_response__descriptor,
    &cohort__v1__check_in_response__descriptor,
    &cohort__v1__get_model_response__descriptor,
    &cohort__v1__upload_response__descriptor,
    &cohort__v1__report_response__descriptor};

/* Latency categories of successful calls; CheckIn split by its answer. */
enum cat {
  C_REGISTER,
  C_CHECKIN_TASK,
  C_CHECKIN_HELD, /* answered (any outcome) after --held-ms or more */
  C_CHECKIN_RETRY,
  C_CHECKIN_DONE,
  C_GETMODEL,
  C_UPLOAD,
  C_REPORT,
  N_C
};
static const char *const CAT_NAME[N_C] = {
    "register",     "checkin_task", "checkin_held", "checkin_retry",
    "checkin_done", "getmodel",     "upload",       "report"};

/* The gRPC name of code, or the name of one of this program's own
 * outcomes beyond them. */
static const char *status_name(int code) {
  static const char *const LOCAL[N_ERR - N_STATUS] = {
      "LOCAL_START_FAILED", "BAD_REPLY", "MODEL_DIGEST_MISMATCH"};
  return code < N_STATUS ? rpc_status_name(code) : LOCAL[code - N_STATUS];
}

/* What one round looked like from here; guarded by g_rounds_mu. */
typedef struct round_seen {
  uint64_t tasks, evaluations, uploads, reports, dropped;
  double first_task, last_complete; /* 0: not yet */
} round_seen;

#define MAX_ROUNDS 100000
static pthread_mutex_t g_rounds_mu = PTHREAD_MUTEX_INITIALIZER;
static round_seen *g_rounds;
static size_t g_n_rounds; /* highest round seen + 1 */

static atomic_int g_stop;
static atomic_int g_fatal;
static atomic_int g_logged_errors;
static atomic_ullong g_registered, g_done, g_failed, g_tasks, g_uploads;
static atomic_int g_reg_inflight;
static atomic_int g_running; /* worker threads not yet ended */
static double g_t0;
static char *g_token; /* set by main before the threads start */

/* ---- virtual clients ---- */

enum action { A_REGISTER, A_CHECKIN, A_GETMODEL, A_UPLOAD, A_REPORT };
enum phase { P_ACTIVE, P_DONE, P_FAILED, P_STOPPED };

struct worker;

typedef struct vclient {
  struct worker *w;
  grpc_channel *ch;
  uint32_t index;
  uint8_t phase;  /* enum phase */
  uint8_t action; /* the call in flight, or the one its timer will start */
  uint8_t attempts, refusals, evaluate;
  double started; /* when the call in flight began */
  /* Out-parameters of the call in flight: live until its tag returns. */
  grpc_call *call;
  grpc_byte_buffer *send_bb, *recv_bb;
  grpc_metadata_array md_in, trailers;
  grpc_status_code status;
  grpc_slice details;
  const char *error_string;
  grpc_metadata auth; /* "authorization: Bearer <token>" once registered */
  int has_auth;
  /* The task in hand. */
  uint64_t round, model_version, model_size, offset, exchanges;
  uint32_t max_chunk;
  uint8_t model_sha[CRYPTO_SHA256_LEN];
  crypto_sha256_ctx *sha; /* the download's running digest, or NULL */
  /* The download is compared with, or added to, its worker's copy of the
   * same model instead of hashed (worker.copy). */
  uint8_t follows;
  double trained_at;
} vclient;

typedef struct timer {
  double at;
  vclient *c;
} timer;

typedef struct worker {
  int id;
  pthread_t thread;
  grpc_completion_queue *cq;
  vclient **clients;
  size_t n_clients;
  /* Clients waiting for a registration slot, in order. */
  vclient **reg_queue;
  size_t reg_head, reg_tail; /* ring of n_clients + 1 */
  /* --register-first: registered clients waiting for the others. */
  vclient **parked;
  size_t n_parked;
  size_t inflight, finished;
  int stopping;
  timer *heap;
  size_t heap_n, heap_cap;
  /* Measurements, merged by main once the thread has ended. */
  hist lat[N_C];
  uint64_t errors[N_M][N_ERR];
  double first_done, last_done;
  /* The upload all of this thread's clients send for a model of
   * update_params floats: fp32's wire format, and its digest. Chunks are
   * sent from it by reference, so gRPC may hold it past a call: this is
   * the thread's reference to it. */
  rpc_shared *update_ref;
  size_t update_len, update_params;
  uint8_t update_sha[CRYPTO_SHA256_LEN];
  uint64_t update_xxh64; /* its checksum, as a client sends it */
  /* One copy of the model this thread's clients download (copy_sha, of
   * copy_size bytes), its first copy_len bytes as whichever client got
   * each range first received them. A client whose task names that model
   * compares what it receives with the copy, or adds it to the copy's end,
   * instead of hashing it; the copy is hashed once, when whole
   * (copy_checked, copy_ok), and every such client's model is the copy.
   * On a fleet each client hashes on its own CPU, while here one process
   * stands in for all of them on the coordinator's machine: 50 hashes of
   * the same 407 KB a round were 38% of its CPU, and with a copy made by
   * one client at a time, the clients of a round, which download at once,
   * still hashed nearly 500 times at N=500 (7% of its CPU). The copy
   * changes to another model only when no client uses it (copy_users);
   * until then a task naming another model hashes its own download. */
  uint8_t *copy;
  size_t copy_cap, copy_len, copy_users;
  uint64_t copy_size;
  uint8_t copy_sha[CRYPTO_SHA256_LEN];
  int copy_checked, copy_ok;
  uint64_t rng; /* jitter */
} worker;

static uint64_t worker_rand(worker *w) {
  /* xorshift64*: jitter only, no security. */
  w->rng ^= w->rng >> 12;
  w->rng ^= w->rng << 25;
  w->rng ^= w->rng >> 27;
  return w->rng * 2685821657736338717ull;
}

/* ---- timers: a binary min-heap of wake-up times per thread ---- */

static int heap_push(worker *w, double at, vclient *c) {
  if (w->heap_n == w->heap_cap) {
    size_t cap = w->heap_cap ? 2 * w->heap_cap : 1024;
    timer *h = realloc(w->heap, cap * sizeof *h);
    if (!h)
      return COHORT_ENOMEM;
    w->heap = h;
    w->heap_cap = cap;
  }
  size_t i = w->heap_n++;
  while (i > 0 && w->heap[(i - 1) / 2].at > at) {
    w->heap[i] = w->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  w->heap[i] = (timer){at, c};
  return COHORT_OK;
}

static timer heap_pop(worker *w) {
  timer top = w->heap[0], last = w->heap[--w->heap_n];
  size_t i = 0;
  for (;;) {
    size_t k = 2 * i + 1;
    if (k >= w->heap_n)
      break;
    if (k + 1 < w->heap_n && w->heap[k + 1].at < w->heap[k].at)
      k++;
    if (w->heap[k].at >= last.at)
      break;
    w->heap[i] = w->heap[k];
    i = k;
  }
  if (w->heap_n)
    w->heap[i] = last;
  return top;
}

/* ---- bookkeeping ---- */

static round_seen *round_at(uint64_t r) {
  if (r >= MAX_ROUNDS)
    return NULL;
  if (r >= g_n_rounds) {
    size_t n = (size_t)r + 1;
    round_seen *t = realloc(g_rounds, n * sizeof *t);
    if (!t)
      return NULL;
    memset(t + g_n_rounds, 0, (n - g_n_rounds) * sizeof *t);
    g_rounds = t;
    g_n_rounds = n;
  }
  return &g_rounds[r];
}

enum round_event { R_TASK, R_COMPLETE, R_DROPPED };

static void note_round(const vclient *c, enum round_event ev) {
  double now = clock_mono_s() - g_t0;
  pthread_mutex_lock(&g_rounds_mu);
  round_seen *r = round_at(c->round);
  if (r) {
    if (ev == R_TASK) {
      c->evaluate ? r->evaluations++ : r->tasks++;
      if (r->first_task == 0)
        r->first_task = now;
    } else if (ev == R_COMPLETE) {
      c->evaluate ? r->reports++ : r->uploads++;
      r->last_complete = now;
    } else {
      r->dropped++;
    }
  }
  pthread_mutex_unlock(&g_rounds_mu);
}

static void finish(vclient *c, enum phase p) {
  worker *w = c->w;
  c->phase = (uint8_t)p;
  w->finished++;
  if (p == P_DONE) {
    double now = clock_mono_s() - g_t0;
    if (w->first_done == 0)
      w->first_done = now;
    w->last_done = now;
    atomic_fetch_add(&g_done, 1);
  } else if (p == P_FAILED) {
    atomic_fetch_add(&g_failed, 1);
  }
}

static void schedule(vclient *c, enum action a, double delay_ms) {
  c->action = (uint8_t)a;
  if (heap_push(c->w, clock_mono_s() + delay_ms / 1000.0, c)) {
    fprintf(stderr, "bench_load: out of memory for timers\n");
    atomic_store(&g_fatal, 1);
    atomic_store(&g_stop, 1);
    finish(c, P_FAILED);
  }
}

static double backoff_ms(vclient *c) {
  double bound = BACKOFF_INITIAL_MS;
  for (int i = 0; i < c->attempts && bound < BACKOFF_MAX_MS; i++)
    bound *= 2;
  if (bound > BACKOFF_MAX_MS)
    bound = BACKOFF_MAX_MS;
  return (double)(worker_rand(c->w) % ((uint64_t)bound + 1));
}

/* c's download no longer uses its worker's copy of the model. */
static void unfollow(vclient *c) {
  if (c->follows)
    c->w->copy_users--;
  c->follows = 0;
}

static void drop_task(vclient *c) {
  unfollow(c);
  if (c->sha) {
    uint8_t scratch[CRYPTO_SHA256_LEN];
    crypto_sha256_end(c->sha, scratch);
    c->sha = NULL;
  }
}

/* Whether c's download can use its worker's copy of the model: the copy is
 * of c's model (and not found to differ from its digest), or no client uses
 * it and it becomes one of c's. */
static int follow_copy(vclient *c) {
  worker *w = c->w;
  int same = w->copy_size == c->model_size &&
             memcmp(w->copy_sha, c->model_sha, CRYPTO_SHA256_LEN) == 0 &&
             !(w->copy_checked && !w->copy_ok);
  if (!same) {
    if (w->copy_users > 0)
      return 0;
    if (w->copy_cap < c->model_size) {
      uint8_t *more = realloc(w->copy, (size_t)c->model_size);
      if (!more)
        return 0;
      w->copy = more;
      w->copy_cap = (size_t)c->model_size;
    }
    w->copy_size = c->model_size;
    memcpy(w->copy_sha, c->model_sha, CRYPTO_SHA256_LEN);
    w->copy_len = 0;
    w->copy_checked = 0;
  }
  w->copy_users++;
  c->follows = 1;
  return 1;
}

static void log_call_error(const vclient *c, int code, const char *detail) {
  if (atomic_fetch_add(&g_logged_errors, 1) >= MAX_LOGGED_ERRORS)
    return;
  fprintf(stderr, "bench_load: client %u %s: %s: %s\n", c->index,
          METHOD_NAME[c->action], status_name(code), detail);
}

/* ---- calls ---- */

static void call_cleanup(vclient *c) {
  grpc_slice_unref(c->details);
  c->details = grpc_empty_slice();
  gpr_free((void *)c->error_string);
  c->error_string = NULL;
  grpc_metadata_array_destroy(&c->md_in);
  grpc_metadata_array_destroy(&c->trailers);
  if (c->recv_bb)
    grpc_byte_buffer_destroy(c->recv_bb);
  c->recv_bb = NULL;
  if (c->send_bb)
    grpc_byte_buffer_destroy(c->send_bb);
  c->send_bb = NULL;
  if (c->call)
    grpc_call_unref(c->call);
  c->call = NULL;
}

static void on_call_failed(vclient *c, int code, const char *detail);

/* Starts c->action's call with request m: one batch of six ops whose tag is
 * the client. m is packed straight into the slice gRPC sends from; tail,
 * when not NULL, is the bytes of m's data field (PB_UPLOAD_DATA_FIELD, left
 * empty in m), sent after it by reference, not copied. A call that cannot
 * start counts as a failed attempt. */
static void start_call(vclient *c, const ProtobufCMessage *m,
                       const rpc_tail *tail, long timeout_ms) {
  worker *w = c->w;
  pb_head h = {
      .m = m, .field = PB_UPLOAD_DATA_FIELD, .tail_len = tail ? tail->len : 0};
  size_t len = tail ? pb_head_size(&h) : protobuf_c_message_get_packed_size(m);
  grpc_slice sl[2];
  size_t n = 1;
  sl[0] = grpc_slice_malloc(len);
  uint8_t *dst = GRPC_SLICE_START_PTR(sl[0]);
  if ((tail ? pb_head_pack(&h, dst) : protobuf_c_message_pack(m, dst)) != len) {
    grpc_slice_unref(sl[0]);
    on_call_failed(c, STATUS_LOCAL, "cannot pack the request");
    return;
  }
  if (tail && tail->len)
    sl[n++] = rpc_tail_slice(tail);
  c->send_bb = grpc_raw_byte_buffer_create(sl, n);
  for (size_t i = 0; i < n; i++)
    grpc_slice_unref(sl[i]);
  gpr_timespec deadline =
      gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                   gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
  c->call = grpc_channel_create_call(
      c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, w->cq,
      grpc_slice_from_static_string(METHOD_PATH[c->action]), NULL, deadline,
      NULL);
  if (!c->call) {
    call_cleanup(c);
    on_call_failed(c, STATUS_LOCAL, "grpc_channel_create_call failed");
    return;
  }
  grpc_metadata_array_init(&c->md_in);
  grpc_metadata_array_init(&c->trailers);
  c->recv_bb = NULL;
  c->status = GRPC_STATUS_UNKNOWN;
  c->details = grpc_empty_slice();
  c->error_string = NULL;
  int authed = c->action != A_REGISTER;
  grpc_op ops[6];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  /* Like libcohort: wait for the connection rather than fail fast while a
   * channel (re)connects under load. */
  ops[0].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY;
  ops[0].data.send_initial_metadata.count = authed ? 1 : 0;
  ops[0].data.send_initial_metadata.metadata = authed ? &c->auth : NULL;
  ops[1].op = GRPC_OP_SEND_MESSAGE;
  ops[1].data.send_message.send_message = c->send_bb;
  ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
  ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
  ops[3].data.recv_initial_metadata.recv_initial_metadata = &c->md_in;
  ops[4].op = GRPC_OP_RECV_MESSAGE;
  ops[4].data.recv_message.recv_message = &c->recv_bb;
  ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
  ops[5].data.recv_status_on_client.trailing_metadata = &c->trailers;
  ops[5].data.recv_status_on_client.status = &c->status;
  ops[5].data.recv_status_on_client.status_details = &c->details;
  ops[5].data.recv_status_on_client.error_string = &c->error_string;
  c->started = clock_mono_s();
  grpc_call_error e = grpc_call_start_batch(c->call, ops, 6, c, NULL);
  if (e != GRPC_CALL_OK) {
    call_cleanup(c);
    on_call_failed(c, STATUS_LOCAL, "grpc_call_start_batch failed");
    return;
  }
  w->inflight++;
  if (c->action == A_REGISTER)
    atomic_fetch_add(&g_reg_inflight, 1);
}

static void do_register(vclient *c) {
  c->action = A_REGISTER;
  sign_key *k = NULL;
  uint8_t pub[SIGN_PUBLIC_LEN];
  if (sign_key_generate(&k)) {
    on_call_failed(c, STATUS_LOCAL, "cannot make an identity key");
    return;
  }
  sign_key_public(k, pub);
  sign_key_free(k);
  char *codecs[] = {"fp32"};
  Cohort__V1__ClientFacts facts = COHORT__V1__CLIENT_FACTS__INIT;
  facts.platform = "bench_load";
  facts.library_version = "bench_load";
  facts.codecs = codecs;
  facts.n_codecs = 1;
  facts.max_message_bytes = PB_MAX_MESSAGE_BYTES;
  Cohort__V1__RegisterRequest req = COHORT__V1__REGISTER_REQUEST__INIT;
  req.enrollment_token = g_token;
  req.facts = &facts;
  req.identity_key.data = pub;
  req.identity_key.len = sizeof pub;
  start_call(c, &req.base, NULL, g_opt.rpc_timeout_ms);
}

static void do_checkin(vclient *c) {
  c->action = A_CHECKIN;
  Cohort__V1__CheckInRequest req = COHORT__V1__CHECK_IN_REQUEST__INIT;
  req.num_examples = (uint64_t)g_opt.examples;
  req.wait_ms = (uint32_t)g_opt.wait_ms;
  start_call(c, &req.base, NULL, g_opt.wait_ms + 30000);
}

static void do_getmodel(vclient *c) {
  c->action = A_GETMODEL;
  Cohort__V1__GetModelRequest req = COHORT__V1__GET_MODEL_REQUEST__INIT;
  req.model_version = c->model_version;
  req.offset = c->offset;
  req.max_bytes = g_opt.download_chunk_kb
                      ? (uint32_t)g_opt.download_chunk_kb * 1024
                      : PB_MAX_CHUNK_BYTES;
  start_call(c, &req.base, NULL, g_opt.rpc_timeout_ms);
}

/* rpc_shared's release of an update. */
static void update_free(void *buf, size_t len) {
  (void)len;
  free(buf);
}

/* The update of a model of n floats: seeded random values in fp32's
 * wire format, made once per thread and model size. */
static int ensure_update(worker *w, size_t n) {
  if (w->update_ref && w->update_params == n)
    return COHORT_OK;
  /* Freed once gRPC has let go of the chunks in flight too. */
  rpc_shared_unref(w->update_ref);
  w->update_ref = NULL;
  codec *cd = NULL;
  char err[200];
  int rc = codec_parse("fp32", &cd, err, sizeof err);
  if (rc)
    return rc;
  codec_params p = {.dim = n};
  size_t cap = codec_wire_size(cd, &p);
  float *delta = malloc(n * sizeof *delta);
  uint8_t *out = malloc(cap ? cap : 1);
  prg rng;
  int have_rng = 0;
  if (!delta || !out || cap == 0) {
    rc = cap == 0 ? COHORT_EINVAL : COHORT_ENOMEM;
    goto out;
  }
  rc = prg_init_u64(&rng, 1);
  if (rc)
    goto out;
  have_rng = 1;
  /* Signs and sizes without a pattern, as a trained update's are: a
   * repeating one (this was 1e-4 (i % 17 - 8)) lets the branch predictor
   * hide what the coordinator's sum costs on real updates. */
  for (size_t i = 0; i < n; i++)
    delta[i] = (float)(1e-3 * (prg_uniform(&rng) - 0.5));
  rc = codec_encode(cd, &p, delta, NULL, &rng, out, &w->update_len, err,
                    sizeof err);
  if (!rc)
    rc = crypto_sha256(out, w->update_len, w->update_sha);
  if (!rc) {
    w->update_xxh64 = checksum_xxh64(out, w->update_len);
    w->update_ref = rpc_shared_new(out, w->update_len, update_free);
    if (!w->update_ref)
      rc = COHORT_ENOMEM;
  }
  if (!rc) {
    out = NULL;
    w->update_params = n;
  }
out:
  if (have_rng)
    prg_free(&rng);
  codec_free(cd);
  free(delta);
  free(out);
  return rc;
}

static void do_upload(vclient *c) {
  c->action = A_UPLOAD;
  worker *w = c->w;
  if (ensure_update(w, (size_t)(c->model_size / sizeof(float)))) {
    fprintf(stderr, "bench_load: cannot encode an update of %llu floats\n",
            (unsigned long long)(c->model_size / sizeof(float)));
    atomic_store(&g_fatal, 1);
    atomic_store(&g_stop, 1);
    finish(c, P_FAILED);
    return;
  }
  size_t left = w->update_len - (size_t)c->offset;
  size_t n = left < c->max_chunk ? left : c->max_chunk;
  /* The chunk goes from the update itself, after the rest of the request
   * (the data field empty in req): no copy of it per call. */
  rpc_tail tail = {.buf = w->update_ref, .offset = (size_t)c->offset, .len = n};
  Cohort__V1__UploadRequest req = COHORT__V1__UPLOAD_REQUEST__INIT;
  req.round = c->round;
  req.total_size = w->update_len;
  req.offset = c->offset;
  req.update_sha256.data = w->update_sha;
  req.update_sha256.len = sizeof w->update_sha;
  req.update_xxh64 = w->update_xxh64;
  req.num_examples = (uint64_t)g_opt.examples;
  req.train_ms = (uint32_t)g_opt.train_ms;
  start_call(c, &req.base, &tail, g_opt.rpc_timeout_ms);
}

static void do_report(vclient *c) {
  c->action = A_REPORT;
  Cohort__V1__Metric ma = COHORT__V1__METRIC__INIT,
                     ml = COHORT__V1__METRIC__INIT;
  ma.name = "global_accuracy";
  ma.value = 0.5;
  ml.name = "global_loss";
  ml.value = 1.0;
  Cohort__V1__Metric *metrics[] = {&ma, &ml};
  Cohort__V1__ReportRequest req = COHORT__V1__REPORT_REQUEST__INIT;
  req.round = c->round;
  req.num_examples = (uint64_t)g_opt.examples;
  req.metrics = metrics;
  req.n_metrics = 2;
  start_call(c, &req.base, NULL, g_opt.rpc_timeout_ms);
}

/* Starts the client's next call, or queues it for a registration slot. */
static void act(vclient *c) {
  if (c->phase != P_ACTIVE)
    return;
  if (c->w->stopping) {
    drop_task(c);
    finish(c, P_STOPPED);
    return;
  }
  switch ((enum action)c->action) {
  case A_REGISTER: {
    worker *w = c->w;
    w->reg_queue[w->reg_tail] = c;
    w->reg_tail = (w->reg_tail + 1) % (w->n_clients + 1);
    break;
  }
  case A_CHECKIN:
    do_checkin(c);
    break;
  case A_GETMODEL:
    do_getmodel(c);
    break;
  case A_UPLOAD:
    do_upload(c);
    break;
  case A_REPORT:
    do_report(c);
    break;
  }
}

static void on_call_failed(vclient *c, int code, const char *detail) {
  worker *w = c->w;
  if (w->stopping) {
    drop_task(c);
    finish(c, P_STOPPED);
    return;
  }
  w->errors[c->action][code]++;
  log_call_error(c, code, detail);
  int transient =
      code == GRPC_STATUS_UNAVAILABLE ||
      code == GRPC_STATUS_DEADLINE_EXCEEDED || code == GRPC_STATUS_CANCELLED ||
      code == GRPC_STATUS_RESOURCE_EXHAUSTED || code == STATUS_LOCAL;
  switch ((enum action)c->action) {
  case A_REGISTER:
    if (!transient && ++c->refusals >= MAX_REGISTER_REFUSALS) {
      finish(c, P_FAILED);
      return;
    }
    break;
  case A_CHECKIN:
    if (code == GRPC_STATUS_UNAUTHENTICATED) {
      c->has_auth = 0; /* the coordinator forgot the session: enroll again */
      c->attempts = 0;
      schedule(c, A_REGISTER, backoff_ms(c));
      return;
    }
    break;
  case A_GETMODEL:
  case A_UPLOAD:
  case A_REPORT:
    if (!transient || c->attempts + 1 >= MAX_CALL_ATTEMPTS) {
      /* The task is lost (the round closed, the reply was bad): back to
       * the coordinator for whatever it has now. */
      drop_task(c);
      note_round(c, R_DROPPED);
      c->attempts = 0;
      schedule(c, A_CHECKIN, backoff_ms(c));
      return;
    }
    break;
  }
  if (c->attempts < 255)
    c->attempts++;
  schedule(c, (enum action)c->action, backoff_ms(c));
}

static void set_auth(vclient *c, const char *token) {
  char v[sizeof "Bearer " + 128];
  snprintf(v, sizeof v, "Bearer %s", token);
  if (c->has_auth)
    grpc_slice_unref(c->auth.value);
  c->auth.key = grpc_slice_from_static_string("authorization");
  c->auth.value = grpc_slice_from_copied_string(v);
  c->has_auth = 1;
}

static void got_register(vclient *c, Cohort__V1__RegisterResponse *r,
                         uint64_t us) {
  size_t n = r->session_token ? strlen(r->session_token) : 0;
  if (n == 0 || n > 128) {
    on_call_failed(c, STATUS_BAD_REPLY, "no usable session token");
    return;
  }
  hist_add(&c->w->lat[C_REGISTER], us);
  set_auth(c, r->session_token);
  atomic_fetch_add(&g_registered, 1);
  c->attempts = 0;
  if (g_opt.register_first)
    c->w->parked[c->w->n_parked++] = c;
  else
    do_checkin(c);
}

static void refuse_task(const char *why, const char *what) {
  if (!atomic_exchange(&g_fatal, 1))
    fprintf(stderr,
            "bench_load: the coordinator's task uses %s %s, which bench_load "
            "does not support (it sends fp32 updates without secure "
            "aggregation); run cohort-server with --codec fp32 --secagg off\n",
            why, what);
  atomic_store(&g_stop, 1);
}

static void got_checkin(vclient *c, Cohort__V1__CheckInResponse *r,
                        uint64_t us) {
  worker *w = c->w;
  int held = us >= (uint64_t)g_opt.held_ms * 1000;
  switch (r->outcome_case) {
  case COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_DONE:
    hist_add(&w->lat[held ? C_CHECKIN_HELD : C_CHECKIN_DONE], us);
    finish(c, P_DONE);
    return;
  case COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_RETRY_LATER:
    hist_add(&w->lat[held ? C_CHECKIN_HELD : C_CHECKIN_RETRY], us);
    c->attempts = 0;
    schedule(c, A_CHECKIN, r->retry_later->after_ms);
    return;
  case COHORT__V1__CHECK_IN_RESPONSE__OUTCOME_TASK:
    break;
  default:
    on_call_failed(c, STATUS_BAD_REPLY, "check-in reply has no outcome");
    return;
  }
  const Cohort__V1__Task *t = r->task;
  const char *spec = t->codec && t->codec[0] ? t->codec : "fp32";
  if (strcmp(spec, "fp32") != 0) {
    refuse_task("codec", spec);
    finish(c, P_FAILED);
    return;
  }
  if (t->secagg) {
    refuse_task("secure aggregation", "(--secagg)");
    finish(c, P_FAILED);
    return;
  }
  if (t->model_sha256.len != CRYPTO_SHA256_LEN || t->model_size == 0 ||
      t->model_size > MAX_MODEL_BYTES || t->model_size % 4 != 0) {
    on_call_failed(c, STATUS_BAD_REPLY, "task with an unacceptable model");
    return;
  }
  hist_add(&w->lat[held ? C_CHECKIN_HELD : C_CHECKIN_TASK], us);
  atomic_fetch_add(&g_tasks, 1);
  c->round = t->round;
  c->model_version = t->model_version;
  c->model_size = t->model_size;
  memcpy(c->model_sha, t->model_sha256.data, CRYPTO_SHA256_LEN);
  c->max_chunk = t->max_chunk_bytes && t->max_chunk_bytes < PB_MAX_CHUNK_BYTES
                     ? t->max_chunk_bytes
                     : PB_MAX_CHUNK_BYTES;
  if (g_opt.upload_chunk_kb &&
      (uint32_t)g_opt.upload_chunk_kb * 1024 < c->max_chunk)
    c->max_chunk = (uint32_t)g_opt.upload_chunk_kb * 1024;
  c->evaluate = t->kind == COHORT__V1__TASK_KIND__TASK_EVALUATE;
  c->offset = 0;
  c->exchanges = 0;
  c->attempts = 0;
  note_round(c, R_TASK);
  drop_task(c);
  if (!follow_copy(c) && !(c->sha = crypto_sha256_begin())) {
    on_call_failed(c, STATUS_LOCAL, "cannot start a digest");
    return;
  }
  do_getmodel(c);
}

/* Reads the GetModel reply in bb where gRPC received it (its slices, with
 * no contiguous copy and no unpacked one): checks that it is the chunk
 * asked for and fits the task's model, and adds its bytes to the
 * download's digest. NULL with *len its length, or why it is refused. */
static const char *model_chunk_take(vclient *c, grpc_byte_buffer *bb,
                                    size_t *len) {
  struct iovec few[64];
  grpc_slice all = grpc_empty_slice();
  size_t n = 0;
  if (rpc_bb_plain(bb))
    n = rpc_bb_iov(bb, few, 64);
  if (n == 0 || n > 64) {
    /* Compressed, or in very many pieces: read into one block. */
    grpc_byte_buffer_reader r;
    if (!grpc_byte_buffer_reader_init(&r, bb))
      return "unreadable reply";
    all = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    few[0].iov_base = GRPC_SLICE_START_PTR(all);
    few[0].iov_len = GRPC_SLICE_LENGTH(all);
    n = 1;
  }
  const char *why = NULL;
  pb_model_chunk ch;
  if (pb_model_chunk_read(few, n, &ch)) {
    why = "malformed reply";
  } else if ((!c->sha && !c->follows) || ch.total != c->model_size ||
             ch.offset != c->offset || !ch.has_data || ch.len == 0 ||
             ch.len > c->model_size - c->offset) {
    why = "model chunk does not fit the task's model";
  } else {
    worker *w = c->w;
    /* The client has compared or added every byte before this chunk, so
     * the copy reaches at least to its offset. */
    uint64_t at = ch.offset;
    for (uint64_t left = ch.len; left > 0;) {
      const uint8_t *p;
      size_t k;
      pb_iov_span(&ch.data, left, &p, &k); /* all there: read above */
      if (!c->follows) {
        crypto_sha256_update(c->sha, p, k);
      } else {
        size_t seen = at < w->copy_len ? w->copy_len - (size_t)at : 0;
        if (seen > k)
          seen = k;
        if (memcmp(p, w->copy + at, seen) != 0) {
          why = "model differs from the copy of it another client received";
          break;
        }
        memcpy(w->copy + at + seen, p + seen, k - seen);
        if (at + k > w->copy_len)
          w->copy_len = (size_t)(at + k);
      }
      at += k;
      left -= k;
    }
    *len = (size_t)ch.len;
  }
  grpc_slice_unref(all);
  return why;
}

/* Whether c's model, all received, matches its digest. */
static int model_verified(vclient *c) {
  worker *w = c->w;
  uint8_t digest[CRYPTO_SHA256_LEN];
  if (!c->follows) {
    int rc = crypto_sha256_end(c->sha, digest);
    c->sha = NULL;
    return rc == 0 && memcmp(digest, c->model_sha, sizeof digest) == 0;
  }
  if (!w->copy_checked) {
    w->copy_ok = w->copy_len == w->copy_size &&
                 crypto_sha256(w->copy, w->copy_len, digest) == 0 &&
                 memcmp(digest, w->copy_sha, sizeof digest) == 0;
    w->copy_checked = 1;
  }
  unfollow(c);
  return w->copy_ok;
}

/* A chunk of len bytes came, already in the digest (or compared). */
static void got_model(vclient *c, size_t len, uint64_t us) {
  hist_add(&c->w->lat[C_GETMODEL], us);
  c->offset += len;
  c->attempts = 0;
  if (c->offset < c->model_size) {
    do_getmodel(c);
    return;
  }
  if (!model_verified(c)) {
    c->attempts = MAX_CALL_ATTEMPTS; /* drop the task */
    on_call_failed(c, STATUS_DIGEST, "model does not match its digest");
    return;
  }
  c->offset = 0;
  if (c->evaluate) {
    do_report(c);
    return;
  }
  c->trained_at = clock_mono_s();
  if (g_opt.train_ms > 0)
    schedule(c, A_UPLOAD, (double)g_opt.train_ms);
  else
    do_upload(c);
}

static void got_upload(vclient *c, Cohort__V1__UploadResponse *r, uint64_t us) {
  hist_add(&c->w->lat[C_UPLOAD], us);
  c->attempts = 0;
  if (r->complete) {
    atomic_fetch_add(&g_uploads, 1);
    note_round(c, R_COMPLETE);
    do_checkin(c);
    return;
  }
  /* Bound the exchanges so a confused coordinator cannot keep us here. */
  size_t len = c->w->update_len;
  if (r->next_offset > len || ++c->exchanges > 4 * (len / c->max_chunk + 2)) {
    c->attempts = MAX_CALL_ATTEMPTS;
    on_call_failed(c, STATUS_BAD_REPLY, "upload never confirmed");
    return;
  }
  c->offset = r->next_offset;
  do_upload(c);
}

/* A call's tag came back: account for it and take the next step. */
static void on_complete(vclient *c) {
  worker *w = c->w;
  w->inflight--;
  if (c->action == A_REGISTER)
    atomic_fetch_sub(&g_reg_inflight, 1);
  uint64_t us = (uint64_t)((clock_mono_s() - c->started) * 1e6);
  int code = (int)c->status;
  char detail[160];
  size_t dn = GRPC_SLICE_LENGTH(c->details);
  if (dn > sizeof detail - 1)
    dn = sizeof detail - 1;
  memcpy(detail, GRPC_SLICE_START_PTR(c->details), dn);
  detail[dn] = '\0';
  ProtobufCMessage *reply = NULL;
  const char *bad = "malformed reply";
  size_t chunk = 0;
  if (code == GRPC_STATUS_OK && c->recv_bb && c->action == A_GETMODEL) {
    bad = model_chunk_take(c, c->recv_bb, &chunk);
  } else if (code == GRPC_STATUS_OK && c->recv_bb) {
    grpc_byte_buffer_reader r;
    if (grpc_byte_buffer_reader_init(&r, c->recv_bb)) {
      grpc_slice all = grpc_byte_buffer_reader_readall(&r);
      grpc_byte_buffer_reader_destroy(&r);
      reply = protobuf_c_message_unpack(METHOD_REPLY[c->action], NULL,
                                        GRPC_SLICE_LENGTH(all),
                                        GRPC_SLICE_START_PTR(all));
      grpc_slice_unref(all);
    }
  }
  call_cleanup(c);
  if (code < 0 || code >= N_STATUS)
    code = GRPC_STATUS_UNKNOWN;
  if (code != GRPC_STATUS_OK) {
    on_call_failed(c, code, detail[0] ? detail : "no detail");
    return;
  }
  if (!reply && bad) {
    on_call_failed(c, STATUS_BAD_REPLY, bad);
    return;
  }
  if (w->stopping) {
    if (reply)
      protobuf_c_message_free_unpacked(reply, NULL);
    drop_task(c);
    finish(c, P_STOPPED);
    return;
  }
  switch ((enum action)c->action) {
  case A_REGISTER:
    got_register(c, (Cohort__V1__RegisterResponse *)reply, us);
    break;
  case A_CHECKIN:
    got_checkin(c, (Cohort__V1__CheckInResponse *)reply, us);
    break;
  case A_GETMODEL:
    got_model(c, chunk, us);
    break;
  case A_UPLOAD:
    got_upload(c, (Cohort__V1__UploadResponse *)reply, us);
    break;
  case A_REPORT:
    hist_add(&w->lat[C_REPORT], us);
    c->attempts = 0;
    note_round(c, R_COMPLETE);
    do_checkin(c);
    break;
  }
  if (reply)
    protobuf_c_message_free_unpacked(reply, NULL);
}

/* ---- the thread ---- */

static void begin_stop(worker *w) {
  w->stopping = 1;
  for (size_t i = 0; i < w->n_clients; i++)
    if (w->clients[i]->call)
      grpc_call_cancel(w->clients[i]->call, NULL);
  /* Clients waiting on a timer or a registration slot end here. */
  while (w->heap_n) {
    vclient *c = heap_pop(w).c;
    if (c->phase == P_ACTIVE && !c->call) {
      drop_task(c);
      finish(c, P_STOPPED);
    }
  }
  while (w->reg_head != w->reg_tail) {
    vclient *c = w->reg_queue[w->reg_head];
    w->reg_head = (w->reg_head + 1) % (w->n_clients + 1);
    if (c->phase == P_ACTIVE && !c->call)
      finish(c, P_STOPPED);
  }
  for (size_t i = 0; i < w->n_parked; i++)
    if (w->parked[i]->phase == P_ACTIVE && !w->parked[i]->call)
      finish(w->parked[i], P_STOPPED);
  w->n_parked = 0;
}

static void *worker_main(void *arg) {
  worker *w = arg;
  while (w->finished < w->n_clients || w->inflight > 0) {
    if (!w->stopping && atomic_load(&g_stop))
      begin_stop(w);
    if (w->stopping && w->inflight == 0)
      break;
    double now = clock_mono_s();
    while (w->heap_n && w->heap[0].at <= now) {
      vclient *c = heap_pop(w).c;
      act(c);
    }
    /* Registration slots: one count over all threads bounds what the
     * coordinator sees at start. */
    while (!w->stopping && w->reg_head != w->reg_tail &&
           atomic_load(&g_reg_inflight) < g_opt.register_rate) {
      vclient *c = w->reg_queue[w->reg_head];
      w->reg_head = (w->reg_head + 1) % (w->n_clients + 1);
      do_register(c);
    }
    /* --register-first: the fleet is in (or out for good): check in. */
    if (w->n_parked && !w->stopping &&
        atomic_load(&g_registered) + atomic_load(&g_failed) >=
            (unsigned long long)g_opt.clients) {
      for (size_t i = 0; i < w->n_parked; i++)
        do_checkin(w->parked[i]);
      w->n_parked = 0;
    }
    double wake = now + 0.1; /* stop requests and registration slots */
    if (w->heap_n && w->heap[0].at < wake)
      wake = w->heap[0].at;
    double wait_s = wake - clock_mono_s();
    gpr_timespec deadline = gpr_time_add(
        gpr_now(GPR_CLOCK_MONOTONIC),
        gpr_time_from_micros(wait_s > 0 ? (int64_t)(wait_s * 1e6) : 0,
                             GPR_TIMESPAN));
    grpc_event ev = grpc_completion_queue_next(w->cq, deadline, NULL);
    /* Drain what is ready without waiting again. */
    while (ev.type == GRPC_OP_COMPLETE) {
      on_complete((vclient *)ev.tag);
      ev = grpc_completion_queue_next(w->cq, gpr_inf_past(GPR_CLOCK_MONOTONIC),
                                      NULL);
    }
  }
  atomic_fetch_sub(&g_running, 1);
  return NULL;
}

/* ---- the program ---- */

static void on_signal(int sig) {
  (void)sig;
  atomic_store(&g_stop, 1);
}

/* Raises the soft open-files limit to the hard one; returns the soft limit
 * in force afterwards. */
static rlim_t raise_nofile(rlim_t *hard) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
    return 0;
  *hard = rl.rlim_max;
  if (rl.rlim_cur < rl.rlim_max) {
    struct rlimit want = {rl.rlim_max, rl.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &want) == 0)
      rl.rlim_cur = rl.rlim_max;
  }
  return rl.rlim_cur;
}

static char *read_token(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "bench_load: --enroll-token-file %s: %s\n", path,
            strerror(errno));
    return NULL;
  }
  char line[512];
  char *tok = NULL;
  if (fgets(line, sizeof line, f)) {
    size_t n = strcspn(line, "\r\n");
    while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\t'))
      n--;
    line[n] = '\0';
    if (n > 0)
      tok = strdup(line);
  }
  fclose(f);
  if (!tok)
    fprintf(stderr,
            "bench_load: --enroll-token-file %s: no token on its "
            "first line\n",
            path);
  return tok;
}

static double self_cpu_s(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0)
    return 0;
  return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
         (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

/* Prints the lines of rounds [*printed, upto) that we took part in. */
static void print_rounds(size_t *printed, size_t upto) {
  pthread_mutex_lock(&g_rounds_mu);
  for (; *printed < upto && *printed < g_n_rounds; (*printed)++) {
    const round_seen *r = &g_rounds[*printed];
    if (r->first_task == 0)
      continue;
    double span = r->last_complete > 0 ? r->last_complete - r->first_task : 0;
    printf("round %zu: tasks %llu evaluations %llu uploads %llu reports %llu "
           "dropped %llu; first task at %.2f s, last %s at %.2f s: %.2f s\n",
           *printed, (unsigned long long)r->tasks,
           (unsigned long long)r->evaluations, (unsigned long long)r->uploads,
           (unsigned long long)r->reports, (unsigned long long)r->dropped,
           r->first_task, r->evaluations ? "report" : "upload",
           r->last_complete, span);
  }
  pthread_mutex_unlock(&g_rounds_mu);
  fflush(stdout);
}

int main(int argc, char **argv) {
  int rc = flags_main("bench_load", USAGE, FLAGS, N_FLAGS, argc, argv);
  if (rc >= 0)
    return rc;
  if (!g_opt.token_file) {
    fprintf(stderr, "bench_load: --enroll-token-file is required\n");
    return 2;
  }
  size_t n_clients = (size_t)g_opt.clients;
  size_t n_conn = g_opt.connections ? (size_t)g_opt.connections : n_clients;
  if (n_conn > n_clients)
    n_conn = n_clients;
  size_t n_threads = (size_t)g_opt.threads;
  if (n_threads > n_clients)
    n_threads = n_clients;
  rlim_t hard = 0, soft = raise_nofile(&hard);
  if ((rlim_t)n_conn + FD_HEADROOM > soft) {
    fprintf(stderr,
            "bench_load: %zu connections need about %zu open files; the "
            "limit is %llu (hard limit %llu). Use fewer --connections or "
            "raise the hard limit (ulimit -Hn)\n",
            n_conn, n_conn + FD_HEADROOM, (unsigned long long)soft,
            (unsigned long long)hard);
    return 2;
  }
  g_token = read_token(g_opt.token_file);
  if (!g_token)
    return 2;

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  /* As the coordinator does: the load generator's lock bookkeeping is not
   * what is measured (rpc_absl.h). */
  rpc_absl_release_mode();
  prefault_heap(g_opt.prefault_mb); /* before grpc_init starts threads */
  grpc_init();
  grpc_arg args[] = {
      rpc_int_arg(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, PB_MAX_MESSAGE_BYTES),
      rpc_int_arg(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, PB_MAX_MESSAGE_BYTES),
      rpc_int_arg(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200),
      rpc_int_arg(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000),
      /* Channels to one target with equal args share a connection unless
       * each keeps its own subchannel pool. */
      rpc_int_arg(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1),
  };
  grpc_channel_args chargs = {sizeof args / sizeof args[0], args};
  grpc_channel **channels = calloc(n_conn, sizeof *channels);
  vclient *clients = calloc(n_clients, sizeof *clients);
  worker *workers = calloc(n_threads, sizeof *workers);
  if (!channels || !clients || !workers) {
    fprintf(stderr, "bench_load: out of memory\n");
    return 1;
  }
  grpc_channel_credentials *creds = grpc_insecure_credentials_create();
  for (size_t i = 0; i < n_conn; i++) {
    channels[i] = grpc_channel_create(g_opt.server, creds, &chargs);
    if (!channels[i]) {
      fprintf(stderr, "bench_load: cannot make a channel to %s\n",
              g_opt.server);
      return 1;
    }
  }
  grpc_channel_credentials_release(creds);

  for (size_t t = 0; t < n_threads; t++) {
    worker *w = &workers[t];
    w->id = (int)t;
    w->cq = grpc_completion_queue_create_for_next(NULL);
    w->n_clients = (n_clients - t + n_threads - 1) / n_threads;
    w->clients = calloc(w->n_clients, sizeof *w->clients);
    w->reg_queue = calloc(w->n_clients + 1, sizeof *w->reg_queue);
    w->parked = calloc(w->n_clients + 1, sizeof *w->parked);
    w->rng = 0x9E3779B97F4A7C15ull * (t + 1);
    if (!w->cq || !w->clients || !w->reg_queue || !w->parked) {
      fprintf(stderr, "bench_load: out of memory\n");
      return 1;
    }
  }
  for (size_t i = 0; i < n_clients; i++) {
    vclient *c = &clients[i];
    worker *w = &workers[i % n_threads];
    c->w = w;
    c->ch = channels[i % n_conn];
    c->index = (uint32_t)i;
    c->details = grpc_empty_slice();
    c->action = A_REGISTER;
    w->clients[i / n_threads] = c;
    w->reg_queue[w->reg_tail++] = c;
  }

  g_t0 = clock_mono_s();
  fprintf(stderr,
          "bench_load: %zu clients over %zu connections, %zu threads, "
          "against %s\n",
          n_clients, n_conn, n_threads, g_opt.server);
  atomic_store(&g_running, (int)n_threads);
  for (size_t t = 0; t < n_threads; t++)
    if (pthread_create(&workers[t].thread, NULL, worker_main, &workers[t])) {
      fprintf(stderr, "bench_load: cannot start a thread\n");
      return 1;
    }

  size_t printed = 1; /* rounds count from 1 */
  double next_progress = g_t0 + (double)g_opt.progress_s;
  for (;;) {
    clock_sleep_ms(200);
    double now = clock_mono_s();
    if (now - g_t0 >= (double)g_opt.duration_s && !atomic_load(&g_stop)) {
      fprintf(stderr, "bench_load: --duration-s %ld reached; stopping\n",
              g_opt.duration_s);
      atomic_store(&g_stop, 1);
    }
    /* A round is over once a later one has handed out tasks. */
    pthread_mutex_lock(&g_rounds_mu);
    size_t upto = g_n_rounds ? g_n_rounds - 1 : 0;
    pthread_mutex_unlock(&g_rounds_mu);
    print_rounds(&printed, upto);
    if (g_opt.progress_s && now >= next_progress) {
      next_progress += (double)g_opt.progress_s;
      fprintf(stderr,
              "bench_load: %.0f s: registered %llu, tasks %llu, uploads "
              "%llu, told done %llu, failed %llu, registrations in flight "
              "%d\n",
              now - g_t0, (unsigned long long)atomic_load(&g_registered),
              (unsigned long long)atomic_load(&g_tasks),
              (unsigned long long)atomic_load(&g_uploads),
              (unsigned long long)atomic_load(&g_done),
              (unsigned long long)atomic_load(&g_failed),
              atomic_load(&g_reg_inflight));
    }
    if (atomic_load(&g_running) == 0)
      break;
  }
  for (size_t t = 0; t < n_threads; t++)
    pthread_join(workers[t].thread, NULL);
  double elapsed = clock_mono_s() - g_t0;
  print_rounds(&printed, (size_t)-1);

  /* Merge what the threads measured. */
  hist *lat = calloc(N_C, sizeof *lat);
  uint64_t errors[N_M][N_ERR];
  memset(errors, 0, sizeof errors);
  double first_done = 0, last_done = 0;
  size_t n_done = 0, n_failed = 0, n_stopped = 0, n_registered = 0;
  for (size_t t = 0; t < n_threads; t++) {
    worker *w = &workers[t];
    for (int k = 0; lat && k < N_C; k++)
      hist_merge(&lat[k], &w->lat[k]);
    for (int m = 0; m < N_M; m++)
      for (int e = 0; e < N_ERR; e++)
        errors[m][e] += w->errors[m][e];
    if (w->first_done > 0 && (first_done == 0 || w->first_done < first_done))
      first_done = w->first_done;
    if (w->last_done > last_done)
      last_done = w->last_done;
  }
  for (size_t i = 0; i < n_clients; i++) {
    n_done += clients[i].phase == P_DONE;
    n_failed += clients[i].phase == P_FAILED;
    n_stopped += clients[i].phase == P_STOPPED || clients[i].phase == P_ACTIVE;
    n_registered += clients[i].has_auth;
  }

  printf("\n%-14s %9s %10s %10s %10s %10s\n", "rpc", "count", "p50_ms",
         "p90_ms", "p99_ms", "max_ms");
  for (int k = 0; lat && k < N_C; k++)
    printf("%-14s %9llu %10.2f %10.2f %10.2f %10.2f\n", CAT_NAME[k],
           (unsigned long long)lat[k].n, hist_quantile_ms(&lat[k], 0.5),
           hist_quantile_ms(&lat[k], 0.9), hist_quantile_ms(&lat[k], 0.99),
           (double)lat[k].max_us / 1000.0);
  uint64_t errors_total = 0;
  for (int m = 0; m < N_M; m++) {
    int any = 0;
    for (int e = 0; e < N_ERR; e++) {
      if (!errors[m][e])
        continue;
      printf("%s %s errors: %s %llu", any ? "," : "", any ? "" : METHOD_NAME[m],
             status_name(e), (unsigned long long)errors[m][e]);
      any = 1;
      errors_total += errors[m][e];
    }
    if (any)
      printf("\n");
  }

  printf("\n== summary\n");
  printf("server %s\n", g_opt.server);
  printf("clients %zu\nconnections %zu\nthreads %zu\n", n_clients, n_conn,
         n_threads);
  printf("wait_ms %ld\ntrain_ms %ld\n", g_opt.wait_ms, g_opt.train_ms);
  printf("elapsed_s %.2f\n", elapsed);
  printf("registered %zu\ntold_done %zu\nfailed %zu\nunfinished %zu\n",
         n_registered, n_done, n_failed, n_stopped);
  printf("tasks %llu\nuploads %llu\n",
         (unsigned long long)atomic_load(&g_tasks),
         (unsigned long long)atomic_load(&g_uploads));
  printf("first_told_done_s %.2f\nlast_told_done_s %.2f\ndone_spread_s %.2f\n",
         first_done, last_done, n_done ? last_done - first_done : 0.0);
  size_t n_rounds = 0;
  for (size_t r = 1; r < g_n_rounds; r++) {
    const round_seen *s = &g_rounds[r];
    if (s->first_task == 0)
      continue;
    n_rounds++;
    printf("round.%zu.tasks %llu\nround.%zu.evaluations %llu\n"
           "round.%zu.completed %llu\nround.%zu.dropped %llu\n"
           "round.%zu.first_task_s %.2f\nround.%zu.time_s %.2f\n",
           r, (unsigned long long)s->tasks, r,
           (unsigned long long)s->evaluations, r,
           (unsigned long long)(s->uploads + s->reports), r,
           (unsigned long long)s->dropped, r, s->first_task, r,
           s->last_complete > 0 ? s->last_complete - s->first_task : 0.0);
  }
  printf("rounds_seen %zu\n", n_rounds);
  for (int k = 0; lat && k < N_C; k++)
    printf("latency.%s.count %llu\nlatency.%s.p50_ms %.3f\n"
           "latency.%s.p90_ms %.3f\nlatency.%s.p99_ms %.3f\n"
           "latency.%s.max_ms %.3f\n",
           CAT_NAME[k], (unsigned long long)lat[k].n, CAT_NAME[k],
           hist_quantile_ms(&lat[k], 0.5), CAT_NAME[k],
           hist_quantile_ms(&lat[k], 0.9), CAT_NAME[k],
           hist_quantile_ms(&lat[k], 0.99), CAT_NAME[k],
           (double)lat[k].max_us / 1000.0);
  for (int m = 0; m < N_M; m++)
    for (int e = 0; e < N_ERR; e++)
      if (errors[m][e])
        printf("errors.%s.%s %llu\n", METHOD_NAME[m], status_name(e),
               (unsigned long long)errors[m][e]);
  printf("errors_total %llu\n", (unsigned long long)errors_total);
  printf(
      "loadgen_rss_peak_kb %ld\nloadgen_cpu_s %.2f\nloadgen_prefault_mb %ld\n",
      proc_status_kb("VmHWM:"), self_cpu_s(), g_opt.prefault_mb);
  fflush(stdout);

  for (size_t i = 0; i < n_clients; i++)
    if (clients[i].has_auth)
      grpc_slice_unref(clients[i].auth.value);
  for (size_t i = 0; i < n_conn; i++)
    grpc_channel_destroy(channels[i]);
  for (size_t t = 0; t < n_threads; t++) {
    worker *w = &workers[t];
    grpc_completion_queue_shutdown(w->cq);
    while (grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_REALTIME),
                                      NULL)
               .type != GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(w->cq);
    free(w->clients);
    free(w->reg_queue);
    free(w->parked);
    free(w->heap);
    free(w->copy);
    rpc_shared_unref(w->update_ref);
  }
  grpc_shutdown();
  free(lat);
  free(channels);
  free(clients);
  free(workers);
  free(g_rounds);
  free(g_token);
  int ok = n_done == n_clients && !atomic_load(&g_fatal);
  return ok ? 0 : 1;
}
