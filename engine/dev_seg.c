// dev_seg.c: checking device segments and walking an input as host runs and
// device segments (see dev_seg.h).
#include "engine/dev_seg.h"

int eng_dev_seg_check(const eng_dev_seg *segs, size_t n_segs, const size_t *total, size_t n_inputs, err *e) {
  for (size_t k = 0; k < n_segs; k++) {
    const eng_dev_seg *s = &segs[k];
    if (s->input >= n_inputs)
      return err_set(e, ERR_INVALID_ARGUMENT, "device segment %zu: input %zu, the batch has %zu", k, s->input,
                     n_inputs);
    if (s->bytes == 0 || !s->ptr || s->device < 0)
      return err_set(e, ERR_INVALID_ARGUMENT, "device segment %zu of input %zu: empty, or no device address", k,
                     s->input);
    if (s->offset > total[s->input] || s->bytes > total[s->input] - s->offset)
      return err_set(e, ERR_INVALID_ARGUMENT, "device segment %zu of input %zu: bytes [%zu, %zu) past the input's %zu",
                     k, s->input, s->offset, s->offset + s->bytes, total[s->input]);
    if (k > 0) {
      const eng_dev_seg *p = &segs[k - 1];
      if (p->input > s->input || (p->input == s->input && p->offset + p->bytes > s->offset))
        return err_set(e, ERR_INVALID_ARGUMENT,
                       "device segment %zu of input %zu: not after segment %zu (unsorted or overlapping)", k, s->input,
                       k - 1);
    }
  }
  return 0;
}

void eng_seg_walk_init(eng_seg_walk *w, const eng_dev_seg *segs, size_t n_segs, size_t input, size_t total) {
  *w = (eng_seg_walk){.segs = segs, .n_segs = n_segs, .input = input, .total = total};
  while (w->k < n_segs && segs[w->k].input < input) w->k++;
}

int eng_seg_walk_next(eng_seg_walk *w, eng_copy_run *run) {
  if (w->at >= w->total) return 0;
  const eng_dev_seg *s = w->k < w->n_segs && w->segs[w->k].input == w->input ? &w->segs[w->k] : NULL;
  if (s && s->offset == w->at) {
    *run = (eng_copy_run){.offset = s->offset, .bytes = s->bytes, .seg = s};
    w->at += s->bytes;
    w->k++;
    return 1;
  }
  size_t end = s ? s->offset : w->total;  // host bytes up to the next segment
  *run = (eng_copy_run){.offset = w->at, .bytes = end - w->at, .seg = NULL};
  w->at = end;
  return 1;
}
