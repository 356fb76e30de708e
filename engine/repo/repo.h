// repo: scanning a Triton-style model repository
//   <repo>/<model>/config.pbtxt          (optional)
//   <repo>/<model>/<version>/<file>      (numeric version directories)
// into one entry per model with its parsed config and the versions its
// version_policy selects. The scan reads directories and the config only; it
// never opens the model files.
#ifndef INFERD_ENGINE_REPO_H
#define INFERD_ENGINE_REPO_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/base/err.h"
#include "model_config.pb-c.h"

#define REPO_DEFAULT_MODEL_FILENAME "model.onnx"

typedef struct repo_version {
  int64_t version;
  char path[PATH_MAX];  // <dir>/<version>/<default_model_filename or model.onnx>
} repo_version;

typedef struct repo_model {
  char name[256];
  char dir[PATH_MAX];
  // Never NULL after a scan (barring out-of-memory): the parsed config.pbtxt,
  // or an empty config with only `name` set when the file is missing or bad.
  // Owned by the entry; free with repo_free / repo_model_close.
  Inference__ModelConfig *config;
  int config_from_file;  // config.pbtxt existed and parsed
  // the config came from a load request's override (config_text): the file
  // names in it are a network client's, confined strictly (kernels/base/confine.h)
  int config_override;
  repo_version *versions;  // ascending; empty when status.code != 0
  size_t n_versions;
  err status;  // why this model cannot load (message names the file/field), code 0 when it can
} repo_model;

// A directory a scan left out: its name cannot be a model name (see
// repo_name_problem), so it is neither loaded nor listed.
typedef struct repo_skip {
  char name[256];   // the bytes as found on disk: escape them to show them (srv_log does), never echo them raw
  const char *why;  // static text: "is not valid UTF-8", "contains control characters"
} repo_skip;

// Scans every non-hidden directory of repo_dir, sorted by name. Fails only
// when repo_dir cannot be read (ERR_NOT_FOUND / ERR_INTERNAL) or on
// out-of-memory; a broken model is an entry with status.code != 0.
// A directory whose name repo_name_problem refuses is not an entry: it goes
// to *skipped (sorted, free() it; NULL when skipped is NULL or none was).
// On success the caller owns *models and releases it with repo_free.
int repo_scan(const char *repo_dir, repo_model **models, size_t *n_models, repo_skip **skipped, size_t *n_skipped,
              err *e);

// The names repo_scan would take, sorted, without reading any config: the
// repository index lists the models not loaded from it. skipped as in
// repo_scan. On success the caller owns *names (repo_list_free).
int repo_list(const char *repo_dir, char ***names, size_t *n_names, repo_skip **skipped, size_t *n_skipped, err *e);
void repo_list_free(char **names, size_t n);

// Why a directory name cannot be a model name, or NULL when it can. Model
// names are echoed into the repository index, metadata, errors, /metrics
// labels and REST JSON: a name that is not UTF-8 breaks every client's
// parser (proto3 strings, JSON), and control characters (C0, DEL, C1) forge
// log lines and metric labels. Checks only the bytes, not '/', '.' or length.
const char *repo_name_problem(const char *name);

// Why name cannot name a model directory, or NULL when it can: the above,
// and empty, 256 bytes or longer, starting with '.' (hidden, "." and "..",
// which no scan lists) or containing '/' (a path, not a directory of the
// repository). A load of such a name is refused before anything is built
// or listed.
const char *repo_model_name_problem(const char *name);

// name with control characters, backslashes and bytes that are not UTF-8
// written as \xHH, for messages that quote a refused name; returns the
// length written (truncated at a whole escape to fit cap, NUL included).
size_t repo_name_escape(char *dst, size_t cap, const char *name);

// Scans one model <repo_dir>/<name>. Returns out->status.code (and copies the
// status into e): 0 when the model can load; ERR_NOT_FOUND when there is no
// such model directory; ERR_INVALID_ARGUMENT for a bad name, config or
// version layout. *out is always initialised and must be released with
// repo_model_close, whatever the result.
int repo_scan_model(const char *repo_dir, const char *name, repo_model *out, err *e);

// The same with config_text (protobuf text format, a load request's
// override) taking the place of config.pbtxt; NULL reads the file.
int repo_scan_model_config(const char *repo_dir, const char *name, const char *config_text, repo_model *out,
                           err *e);

// Releases what one entry owns (config, versions) and zeroes it.
void repo_model_close(repo_model *m);

// Releases an array from repo_scan (NULL is fine).
void repo_free(repo_model *models, size_t n);

#endif
