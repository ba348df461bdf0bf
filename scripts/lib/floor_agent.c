/* The "git-lfs floor" of scripts/bench_many_files.sh: a git-lfs custom transfer agent that
 * does no transfer. Uploads complete at once (nothing is sent); downloads copy the object
 * from a local directory laid out as .git/lfs/objects (FLOOR_OBJECTS) into FLOOR_TMP. What
 * a step costs with it is git's and git-lfs's own time (processes, Batch API, filter,
 * object store): no agent can go below it. C, so that its start costs next to nothing.
 * Benchmark use only: it stores nothing.
 *
 *   cc -O2 -o floor-agent scripts/lib/floor_agent.c
 *   git config lfs.customtransfer.NAME.path /path/to/floor-agent
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The 64 hex digits after "oid":" in a message, or 0. */
static int oid_of(const char *line, char out[65]) {
  const char *p = strstr(line, "\"oid\":\"");
  if (!p) return 0;
  p += 7;
  for (int i = 0; i < 64; i++) {
    char c = p[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return 0;
    out[i] = c;
  }
  out[64] = 0;
  return 1;
}

static int copy(const char *from, const char *to) {
  int in = open(from, O_RDONLY), out = -1, ok = 0;
  if (in < 0) return 0;
  out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (out >= 0) {
    char buf[65536];
    ssize_t n;
    ok = 1;
    while ((n = read(in, buf, sizeof buf)) > 0)
      if (write(out, buf, (size_t)n) != n) { ok = 0; break; }
    if (n < 0) ok = 0;
    close(out);
  }
  close(in);
  return ok;
}

int main(void) {
  const char *objects = getenv("FLOOR_OBJECTS"), *tmp = getenv("FLOOR_TMP");
  if (!tmp) tmp = "/tmp";
  char *line = NULL, oid[65], src[4096], dst[4096];
  size_t cap = 0;
  unsigned long n = 0;
  while (getline(&line, &cap, stdin) > 0) {
    if (strstr(line, "\"event\":\"init\"")) {
      puts("{}");
    } else if (strstr(line, "\"event\":\"terminate\"")) {
      break;
    } else if (strstr(line, "\"event\":\"upload\"") && oid_of(line, oid)) {
      printf("{\"event\":\"complete\",\"oid\":\"%s\"}\n", oid);
    } else if (strstr(line, "\"event\":\"download\"") && oid_of(line, oid)) {
      snprintf(src, sizeof src, "%s/%.2s/%.2s/%s", objects ? objects : ".", oid, oid + 2, oid);
      snprintf(dst, sizeof dst, "%s/floor-%d-%lu", tmp, (int)getpid(), n++);
      if (copy(src, dst))
        printf("{\"event\":\"complete\",\"oid\":\"%s\",\"path\":\"%s\"}\n", oid, dst);
      else
        printf("{\"event\":\"complete\",\"oid\":\"%s\",\"error\":{\"code\":2,"
               "\"message\":\"floor agent: cannot copy %s\"}}\n", oid, src);
    } else {
      puts("{\"error\":{\"code\":32,\"message\":\"floor agent: unknown message\"}}");
    }
    fflush(stdout);
  }
  free(line);
  return 0;
}
