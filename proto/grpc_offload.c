// proto/grpc_offload.c: see grpc_offload.h.
#include "proto/grpc_offload.h"

#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#define IS_THREADED_DEFAULT "_ZN9grpc_core8Executor17IsThreadedDefaultEv"

// grpc_offload.h says why this state is process-wide.
static atomic_int declining;
static atomic_ullong declined;
static _Atomic(void *) real;  // libgrpc's IsThreadedDefault, once looked up

// bool grpc_core::Executor::IsThreadedDefault(): a static member function
// without arguments, so a C function of the same symbol name has its ABI.
// Exported from the executable (CMake: --export-dynamic-symbol).
bool grpc_offload_is_threaded_default(void) __asm__(IS_THREADED_DEFAULT);
bool grpc_offload_is_threaded_default(void) {
  if (atomic_load_explicit(&declining, memory_order_relaxed)) {
    atomic_fetch_add_explicit(&declined, 1, memory_order_relaxed);
    return false;
  }
  // gRPC's own answer; looked up once (a lookup per contended combiner would cost more than the offload)
  void *p = atomic_load_explicit(&real, memory_order_acquire);
  if (!p) {
    p = dlsym(RTLD_NEXT, IS_THREADED_DEFAULT);
    if (!p) return false;  // no gRPC below us: nothing to offload to
    atomic_store_explicit(&real, p, memory_order_release);
  }
  bool (*f)(void);
  *(void **)(&f) = p;  // POSIX guarantees dlsym's void * converts to a function pointer
  return f();
}

// A d_ptr of a loaded object's dynamic section: glibc relocates most in place,
// other loaders leave them relative to the load address.
static uintptr_t dyn_addr(const struct dl_phdr_info *info, ElfW(Addr) p) {
  return p < info->dlpi_addr ? info->dlpi_addr + p : p;
}

// Whether libgrpc reaches IsThreadedDefault through its PLT: a relocation of
// DT_JMPREL names it. A library linked with -Bsymbolic-functions (Ubuntu's
// default flags) calls its own copy directly, and no definition of ours can
// answer for it.
static int via_plt(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  const char *base = strrchr(info->dlpi_name, '/');
  base = base ? base + 1 : info->dlpi_name;
  if (strncmp(base, "libgrpc.so", 10) != 0) return 0;
  const ElfW(Dyn) *dyn = NULL;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  const ElfW(Sym) *symtab = NULL;
  const char *strtab = NULL;
  uintptr_t jmprel = 0;
  size_t relsz = 0;
  int rela = 1;
  for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
    switch (dyn->d_tag) {
      case DT_SYMTAB: symtab = (const ElfW(Sym) *)dyn_addr(info, dyn->d_un.d_ptr); break;
      case DT_STRTAB: strtab = (const char *)dyn_addr(info, dyn->d_un.d_ptr); break;
      case DT_JMPREL: jmprel = dyn_addr(info, dyn->d_un.d_ptr); break;
      case DT_PLTRELSZ: relsz = dyn->d_un.d_val; break;
      case DT_PLTREL: rela = dyn->d_un.d_val == DT_RELA; break;
      default: break;
    }
  }
  if (!symtab || !strtab || !jmprel) return 1;  // found libgrpc, no PLT relocations to read
  size_t ent = rela ? sizeof(ElfW(Rela)) : sizeof(ElfW(Rel));
  for (size_t off = 0; off + ent <= relsz; off += ent) {
    // r_info sits after r_offset in both Rel and Rela
    ElfW(Xword) info_word = rela ? ((const ElfW(Rela) *)(jmprel + off))->r_info : ((const ElfW(Rel) *)(jmprel + off))->r_info;
#if __ELF_NATIVE_CLASS == 64
    size_t sym = ELF64_R_SYM(info_word);
#else
    size_t sym = ELF32_R_SYM(info_word);
#endif
    if (strcmp(strtab + symtab[sym].st_name, IS_THREADED_DEFAULT) == 0) {
      *(int *)arg = 1;
      break;
    }
  }
  return 1;
}

int grpc_offload_decline(void) {
  atomic_store_explicit(&declining, 1, memory_order_relaxed);
  // ours must be the definition the dynamic linker finds, and libgrpc must ask the dynamic linker
  void *found = dlsym(RTLD_DEFAULT, IS_THREADED_DEFAULT);
  int plt = 0;
  dl_iterate_phdr(via_plt, &plt);
  return found == (void *)grpc_offload_is_threaded_default && plt;
}

uint64_t grpc_offload_declined(void) { return atomic_load_explicit(&declined, memory_order_relaxed); }
