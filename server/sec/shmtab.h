// server/sec/shmtab.h: the bookkeeping both shared memory registries share
// (shm.c for system shared memory, cuda_shm.c for CUDA): a mutex-guarded
// list of named, reference-counted regions. What a region maps and how it
// is opened and closed stays with its registry; this module only finds,
// lists, counts references and checks windows.
//
// A registry's region struct starts with a srv_shmtab_entry, so an entry
// pointer is the region pointer. The table holds one reference per listed
// entry; unregistering drops it, and the registry's free function runs with
// the last reference, whoever drops it (a request may still hold one).
#ifndef INFERD_SERVER_SHMTAB_H
#define INFERD_SERVER_SHMTAB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"

typedef struct srv_shmtab_entry {
  struct srv_shmtab_entry *next, *prev;  // in the table's list; unlinked at unregister
  struct srv_shmtab_entry *hnext;        // in its name's hash bucket
  char *name;                     // owned; freed by srv_shmtab_entry_close
  uint64_t byte_size;
  atomic_int refs;  // the table's (while listed) plus one per holder
} srv_shmtab_entry;

// Caller-allocated (embedded in a registry). The registry may lock mu to
// guard its own state together with the list (cuda_shm.c: its mappings).
// Names hash into a fixed bucket array, so finding a name (every register,
// every request that names a region) does not walk thousands of regions;
// 1024 buckets hold the default --shm-max-regions (4096) at 4 a chain.
enum { SRV_SHMTAB_BUCKETS = 1024 };

typedef struct srv_shmtab {
  pthread_mutex_t mu;
  srv_shmtab_entry *head;  // every entry, newest first (listing, unregistering all)
  srv_shmtab_entry *buckets[SRV_SHMTAB_BUCKETS];
  size_t count;  // entries listed
  size_t max;    // most entries listed at once (0: no limit)
  void (*free_region)(srv_shmtab_entry *e);  // frees the region that starts with e
} srv_shmtab;

// max: the most regions listed at once (0: no limit). Each system region is
// one mapping, and vm.max_map_count (65530 by default) is shared with
// malloc, thread stacks and model files: past it mmap fails everywhere.
void srv_shmtab_init(srv_shmtab *t, size_t max, void (*free_region)(srv_shmtab_entry *e));
// Unregisters every region (held ones go with their last release).
void srv_shmtab_close(srv_shmtab *t);

// Copies name, sets byte_size and the one reference the table will hold.
// -1 when out of memory (e->name stays NULL).
int srv_shmtab_entry_init(srv_shmtab_entry *e, const char *name, uint64_t byte_size);
void srv_shmtab_entry_close(srv_shmtab_entry *e);

// Drops one reference; runs the table's free_region with the last.
void srv_shmtab_release(srv_shmtab *t, srv_shmtab_entry *e);
// The same for a holder that does not know the table: 1 when that was the
// last reference and the caller frees the region.
int srv_shmtab_unref(srv_shmtab_entry *e);

// With t->mu held: the entry named `name`, or NULL.
srv_shmtab_entry *srv_shmtab_find_locked(srv_shmtab *t, const char *name);
// With t->mu held: lists e (the table now holds its reference). Nothing is
// listed, and *err says why (ALREADY_EXISTS naming the region, or
// RESOURCE_EXHAUSTED naming the limit), when the name is taken or the
// table holds max entries; `kind` starts the message ("cuda shared memory").
int srv_shmtab_add_locked(srv_shmtab *t, srv_shmtab_entry *e, const char *kind, err *err);
// The same, taking the lock.
int srv_shmtab_add(srv_shmtab *t, srv_shmtab_entry *e, const char *kind, err *err);
// With t->mu held: what srv_shmtab_add_locked would refuse for `name`, as
// 0 or an error; lets a registry refuse before it maps anything.
int srv_shmtab_check_room_locked(srv_shmtab *t, const char *name, const char *kind, err *err);
// The same, taking the lock.
int srv_shmtab_check_room(srv_shmtab *t, const char *name, const char *kind, err *err);
// 1 when `name` is listed (0 for "" or NULL).
int srv_shmtab_has(srv_shmtab *t, const char *name);

// Takes the name away ("" or NULL: every name); returns how many.
size_t srv_shmtab_unregister(srv_shmtab *t, const char *name);

// The named entry ("" or NULL: every entry), sorted by name, each with a
// reference the caller gives back with srv_shmtab_snapshot_free. An
// unknown name gives 0 entries, not an error: the registry says NOT_FOUND
// in its own words. RESOURCE_EXHAUSTED when out of memory.
int srv_shmtab_snapshot(srv_shmtab *t, const char *name, srv_shmtab_entry ***out, size_t *n, err *e);
void srv_shmtab_snapshot_free(srv_shmtab *t, srv_shmtab_entry **v, size_t n);

// The named entry with one more reference (give it back with
// srv_shmtab_release), or NULL when no such name is listed.
srv_shmtab_entry *srv_shmtab_acquire(srv_shmtab *t, const char *name);

// INVALID_ARGUMENT ("<kind> region '<name>' holds ...") unless
// [offset, offset + size) fits in the entry's byte_size.
int srv_shmtab_check_window(const srv_shmtab_entry *r, const char *kind, uint64_t offset, uint64_t size, err *e);

#endif
