#ifndef __server_h__
#define __server_h__

#ifdef WANT_STATSD
#include "statsd-client.h"
#endif

typedef struct {
  int sockfd;
  PyObject* wsgi_app;
  PyObject* host;
  PyObject* port;
  /* lanner: the largest request body read; a bigger one is answered 413 and its connection closed */
  long long max_body_size;
#ifdef WANT_STATSD
  statsd_link* statsd;
# ifdef WANT_STATSD_TAGS
  char* statsd_tags;
# endif
#endif
} ServerInfo;

void server_run(ServerInfo*);

#endif
