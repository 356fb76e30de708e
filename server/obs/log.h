// server/obs/log.h: leveled log lines on stderr. main sets the levels and the
// format before any thread starts; the LogSettings RPC may change them
// while serving (atomics, so any thread may log meanwhile).
#ifndef INFERD_SERVER_LOG_H
#define INFERD_SERVER_LOG_H

typedef enum srv_log_level { SRV_LOG_ERROR, SRV_LOG_WARN, SRV_LOG_INFO, SRV_LOG_DEBUG } srv_log_level;

// Triton's log_format: "default" (glog style) or "ISO8601".
typedef enum srv_log_format { SRV_LOG_FORMAT_DEFAULT, SRV_LOG_FORMAT_ISO8601 } srv_log_format;

// Enables `l` and every more severe level, disables the rest.
void srv_log_set_level(srv_log_level l);
// Turns one level on or off (Triton's log_info, log_warning, ... are independent).
void srv_log_enable(srv_log_level l, int on);
int srv_log_enabled(srv_log_level l);
void srv_log_set_format(srv_log_format f);
srv_log_format srv_log_get_format(void);
int srv_log_parse_level(const char *s, srv_log_level *out);  // "error|warn|info|debug"; 0 on success
void srv_log(srv_log_level l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
