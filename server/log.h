// server/log.h: leveled log lines on stderr. The level is set once by main
// before any thread starts and only read afterwards.
#ifndef INFERD_SERVER_LOG_H
#define INFERD_SERVER_LOG_H

typedef enum srv_log_level { SRV_LOG_ERROR, SRV_LOG_WARN, SRV_LOG_INFO, SRV_LOG_DEBUG } srv_log_level;

void srv_log_set_level(srv_log_level l);
int srv_log_parse_level(const char *s, srv_log_level *out);  // "error|warn|info|debug"; 0 on success
int srv_log_enabled(srv_log_level l);
void srv_log(srv_log_level l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
