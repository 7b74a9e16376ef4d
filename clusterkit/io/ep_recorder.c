/* clusterkit's EP answer recorder: a plugin-EP library that loads the real one and forwards to it.

   onnxruntime hands an execution provider's answer to its GetCapability through the EP API's
   OrtEpApi::EpGraphSupportInfo_AddNodesToFuse: one call per group of nodes the EP takes. This
   library replaces that entry of onnxruntime's (process-wide) OrtEpApi table by a function that
   writes each group's node names and op types to a text buffer and then calls the original, so
   the answer is known even when the EP fails afterwards (compiling the groups). With
   clusterkit_set_skip_compile(1) every OrtEp the real factories create refuses to compile: the
   session stops right after partitioning, which is all a capability query needs.

   The table slots below are the C API's (the tables only ever grow at their end, so a slot keeps
   its number in every later onnxruntime); they are checked at run time against the version. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef void Status;
typedef const void *(*GetApiFn)(uint32_t);
typedef struct { GetApiFn get_api; const char *(*version)(void); } ApiBase;
typedef Status *(*AddFn)(void *, const void *const *, size_t, const void *);
typedef Status *(*StringFn)(const void *, const char **);
typedef void (*ReleaseStatusFn)(Status *);
typedef Status *(*MakeStatusFn)(int, const char *);
typedef Status *(*CreateFactoriesFn)(const char *, const ApiBase *, const void *, void **, size_t,
                                     size_t *);
typedef Status *(*ReleaseFactoryFn)(void *);
typedef Status *(*CreateEpFn)(void *, const void *const *, const void *const *, size_t,
                              const void *, const void *, void **);
typedef Status *(*CompileFn)(void *, const void **, const void **, size_t, void **, void **);

enum {
  API_VERSION = 23,       /* GetEpApi (1.22) and Node_GetName (1.23) exist from here */
  MAKE_STATUS = 0,        /* OrtApi::CreateStatus */
  RELEASE_STATUS = 93,    /* OrtApi::ReleaseStatus */
  GET_EP_API = 317,       /* OrtApi::GetEpApi */
  NODE_NAME = 349,        /* OrtApi::Node_GetName */
  NODE_OP = 350,          /* OrtApi::Node_GetOperatorType */
  ADD_NODES_TO_FUSE = 2,  /* OrtEpApi::EpGraphSupportInfo_AddNodesToFuse */
  FACTORY_CREATE_EP = 4,  /* OrtEpFactory::CreateEp (after a uint32 padded to 8 bytes) */
  EP_COMPILE = 3,         /* OrtEp::Compile (likewise) */
  MAX_FACTORIES = 16,
  ORT_EP_FAIL = 11
};

static char target[4096];
static void *real;
static const void *const *api;
static AddFn original_add;
static int skip_compile;
static void *factories_seen[MAX_FACTORIES];
static CreateEpFn factories_create[MAX_FACTORIES];
static size_t n_factories;
static char *text;
static size_t text_len, text_cap;

static void append(const char *s) {
  size_t n = strlen(s);
  if (text_len + n + 1 > text_cap) {
    size_t cap = text_cap ? text_cap * 2 : 65536;
    while (cap < text_len + n + 1) cap *= 2;
    char *grown = realloc(text, cap);
    if (!grown) return;
    text = grown;
    text_cap = cap;
  }
  memcpy(text + text_len, s, n + 1);
  text_len += n;
}

static const char *node_string(const void *node, int slot) {
  const char *out = NULL;
  Status *st = ((StringFn)api[slot])(node, &out);
  if (st) {
    ((ReleaseStatusFn)api[RELEASE_STATUS])(st);
    return "?";
  }
  return out ? out : "?";
}

static Status *record_add(void *info, const void *const *nodes, size_t n, const void *opts) {
  char head[64];
  snprintf(head, sizeof head, "group %p\n", info);
  append(head);
  for (size_t i = 0; i < n; i++) {
    append(node_string(nodes[i], NODE_NAME));
    append("\t");
    append(node_string(nodes[i], NODE_OP));
    append("\n");
  }
  return original_add(info, nodes, n, opts);
}

static Status *refuse_compile(void *ep, const void **graphs, const void **fused, size_t count,
                              void **infos, void **ctx_nodes) {
  char line[64];
  (void)ep, (void)graphs, (void)fused, (void)infos, (void)ctx_nodes;
  snprintf(line, sizeof line, "compile %zu\n", count);
  append(line);
  return ((MakeStatusFn)api[MAKE_STATUS])(ORT_EP_FAIL, "clusterkit: compile skipped");
}

static Status *create_ep(void *factory, const void *const *devices, const void *const *meta,
                         size_t n, const void *options, const void *logger, void **ep) {
  CreateEpFn create = NULL;
  for (size_t i = 0; i < n_factories; i++)
    if (factories_seen[i] == factory) create = factories_create[i];
  if (!create) return ((MakeStatusFn)api[MAKE_STATUS])(ORT_EP_FAIL, "clusterkit: unknown factory");
  Status *st = create(factory, devices, meta, n, options, logger, ep);
  if (!st && skip_compile && *ep) ((void **)*ep)[EP_COMPILE] = (void *)refuse_compile;
  return st;
}

static int patch_add(void) {
  if (original_add) return 0;
  void **ep_api = (void **)((const void *(*)(void))api[GET_EP_API])();
  void **slot = ep_api + ADD_NODES_TO_FUSE;
  long page = sysconf(_SC_PAGESIZE);
  void *start = (void *)((uintptr_t)slot & ~(uintptr_t)(page - 1));
  /* the aligned slot lies within one page; it stays writable (its neighbours on that page
     may be data that is written later, so no protection is guessed back) */
  if (mprotect(start, (size_t)page, PROT_READ | PROT_WRITE)) return -1;
  original_add = (AddFn)*slot;
  *slot = (void *)record_add;
  return 0;
}

static void wrap_factories(void **factories, size_t num) {
  for (size_t i = 0; i < num && n_factories < MAX_FACTORIES; i++) {
    void **f = (void **)factories[i];
    if ((CreateEpFn)f[FACTORY_CREATE_EP] == (CreateEpFn)create_ep) continue;
    factories_seen[n_factories] = f;
    factories_create[n_factories++] = (CreateEpFn)f[FACTORY_CREATE_EP];
    f[FACTORY_CREATE_EP] = (void *)create_ep;
  }
}

void clusterkit_set_target(const char *path) { strncpy(target, path, sizeof target - 1); }
void clusterkit_set_skip_compile(int on) { skip_compile = on; }
const char *clusterkit_record(void) { return text ? text : ""; }
void clusterkit_clear(void) {
  text_len = 0;
  if (text) text[0] = 0;
}

Status *CreateEpFactories(const char *name, const ApiBase *base, const void *logger,
                          void **factories, size_t max, size_t *num) {
  api = (const void *const *)base->get_api(API_VERSION);
  if (!api) return NULL;
  if (!real) real = dlopen(target, RTLD_NOW | RTLD_LOCAL);
  CreateFactoriesFn create = real ? (CreateFactoriesFn)dlsym(real, "CreateEpFactories") : NULL;
  if (!create) return ((MakeStatusFn)api[MAKE_STATUS])(ORT_EP_FAIL, real ? "no CreateEpFactories"
                                                                         : dlerror());
  if (patch_add())
    return ((MakeStatusFn)api[MAKE_STATUS])(ORT_EP_FAIL, "clusterkit: cannot hook the EP API");
  Status *st = create(name, base, logger, factories, max, num);
  if (!st) wrap_factories(factories, *num);
  return st;
}

Status *ReleaseEpFactory(void *factory) {
  ReleaseFactoryFn release = real ? (ReleaseFactoryFn)dlsym(real, "ReleaseEpFactory") : NULL;
  return release ? release(factory) : NULL;
}
