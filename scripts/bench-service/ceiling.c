// The raw SQLite ceiling for `beckon serve`'s writes, through SQLite's C API: the same rows the service wrote in a run
// (its input log records, its actions, their outbox entries for destinations, its checkpoints' user states), copied
// from that run's database into a new one with the service's schema (its tables, indexes and triggers), in the same
// transactions' shape — as many transactions as the service committed, each with its share of the input records and
// their actions, and every user's state as many times as the service wrote checkpoints, evenly spread — with the
// service's settings (WAL, synchronous=FULL), as fast as one thread goes: prepared statements, values bound in place
// (no copies), every row read into memory beforehand.
// Build: cc -O2 -o ceiling ceiling.c -lsqlite3 (scripts/bench-service.sh does).
// Usage: ceiling SOURCE_DB COMMITS CHECKPOINTS. Prints events/s.
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
  int columns;
  size_t count, capacity;
  sqlite3_value **values;  // count × columns, each a copy made by sqlite3_value_dup
} Rows;

static void die(sqlite3 *db, const char *what) {
  fprintf(stderr, "ceiling: %s: %s\n", what, db ? sqlite3_errmsg(db) : "out of memory");
  exit(1);
}

static Rows load(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) die(db, sql);
  Rows r = {sqlite3_column_count(st), 0, 0, NULL};
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (r.count == r.capacity) {
      r.capacity = r.capacity ? r.capacity * 2 : 1024;
      r.values = realloc(r.values, r.capacity * r.columns * sizeof *r.values);
      if (!r.values) die(NULL, "rows");
    }
    for (int c = 0; c < r.columns; c++) r.values[r.count * r.columns + c] = sqlite3_value_dup(sqlite3_column_value(st, c));
    r.count++;
  }
  sqlite3_finalize(st);
  return r;
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) die(db, sql);
  return st;
}

// Binds row i of r to st's parameters 1…columns (blobs and texts in place: the copies outlive the statement's step).
static void insert(sqlite3 *db, sqlite3_stmt *st, const Rows *r, size_t i) {
  for (int c = 0; c < r->columns; c++) {
    sqlite3_value *v = r->values[i * r->columns + c];
    int rc;
    switch (sqlite3_value_type(v)) {
      case SQLITE_INTEGER: rc = sqlite3_bind_int64(st, c + 1, sqlite3_value_int64(v)); break;
      case SQLITE_FLOAT: rc = sqlite3_bind_double(st, c + 1, sqlite3_value_double(v)); break;
      case SQLITE_TEXT:
        rc = sqlite3_bind_text(st, c + 1, (const char *)sqlite3_value_text(v), sqlite3_value_bytes(v), SQLITE_STATIC);
        break;
      case SQLITE_BLOB: rc = sqlite3_bind_blob(st, c + 1, sqlite3_value_blob(v), sqlite3_value_bytes(v), SQLITE_STATIC); break;
      default: rc = sqlite3_bind_null(st, c + 1); break;
    }
    if (rc != SQLITE_OK) die(db, "bind");
  }
  if (sqlite3_step(st) != SQLITE_DONE) die(db, "insert");
  sqlite3_reset(st);
}

static void exec(sqlite3 *db, const char *sql) {
  if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) die(db, sql);
}

static size_t share(size_t total, size_t i, size_t n) { return (size_t)((double)total * (double)(i + 1) / (double)n + 0.5); }

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: ceiling SOURCE_DB COMMITS CHECKPOINTS\n");
    return 2;
  }
  long commits = atol(argv[2]), checkpoints = atol(argv[3]);
  sqlite3 *src;
  if (sqlite3_open_v2(argv[1], &src, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) die(src, argv[1]);
  Rows inputs = load(src, "SELECT received_at, events, body FROM input_log ORDER BY seq");
  Rows actions = load(src, "SELECT user_id, action_id, json FROM action_log ORDER BY seq");
  // An entry holds its action's position where the schema has it (a build before it did not).
  sqlite3_stmt *probe = NULL;
  int positions = sqlite3_prepare_v2(src, "SELECT action_seq FROM outbox LIMIT 0", -1, &probe, NULL) == SQLITE_OK;
  sqlite3_finalize(probe);
  Rows outbox = load(src, positions ? "SELECT destination, action_id, user_id, body, next_at, created_at, action_seq FROM outbox ORDER BY id"
                                    : "SELECT destination, action_id, user_id, body, next_at, created_at FROM outbox ORDER BY id");
  Rows states = load(src, "SELECT user_id, bytes, next_due, merged_into FROM user_state");
  Rows schema = load(src,
                     "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'"
                     " AND tbl_name != 'grdb_migrations' ORDER BY type = 'table' DESC, type = 'index' DESC, rowid");
  sqlite3_close(src);
  if (inputs.count == 0) {
    fprintf(stderr, "ceiling: %s has no input records\n", argv[1]);
    return 1;
  }

  // A new database beside the source (the same disk).
  char path[4096];
  snprintf(path, sizeof path, "%s.ceiling", argv[1]);
  const char *suffixes[] = {"", "-wal", "-shm"};
  for (int k = 0; k < 3; k++) {
    char p[4200];
    snprintf(p, sizeof p, "%s%s", path, suffixes[k]);
    remove(p);
  }
  sqlite3 *db;
  if (sqlite3_open(path, &db) != SQLITE_OK) die(db, path);
  exec(db, "PRAGMA journal_mode=WAL");
  exec(db, "PRAGMA synchronous=FULL");
  // The service's own schema, as its run left it: every table, index and trigger its rows touch (and the few they
  // do not, empty), so that the ceiling keeps what the service's writes keep.
  for (size_t i = 0; i < schema.count; i++) exec(db, (const char *)sqlite3_value_text(schema.values[i]));
  sqlite3_stmt *putInput = prepare(db, "INSERT INTO input_log (received_at, events, body) VALUES (?, ?, ?)");
  sqlite3_stmt *putAction = prepare(db, "INSERT INTO action_log (user_id, action_id, json) VALUES (?, ?, ?)");
  sqlite3_stmt *putOutbox = prepare(
      db, positions ? "INSERT INTO outbox (destination, action_id, user_id, body, next_at, created_at, action_seq)"
                      " VALUES (?, ?, ?, ?, ?, ?, ?)"
                    : "INSERT INTO outbox (destination, action_id, user_id, body, next_at, created_at) VALUES (?, ?, ?, ?, ?, ?)");
  sqlite3_stmt *putState = prepare(db, "INSERT OR REPLACE INTO user_state (user_id, bytes, next_due, merged_into) VALUES (?, ?, ?, ?)");
  sqlite3_stmt *putStream = prepare(db, "INSERT OR REPLACE INTO stream_state (id, bytes) VALUES (1, x'00')");
  sqlite3_stmt *putCheckpoint = prepare(db, "INSERT OR REPLACE INTO checkpoint (id, input_seq) VALUES (1, ?)");
  // The pending entries counted per destination, once a destination a transaction, as the service's commit does
  // (when its schema has the count: a build before it did not).
  sqlite3_stmt *putPending = NULL;
  sqlite3_prepare_v2(
      db, "INSERT INTO outbox_pending (destination, n) VALUES (?, ?) ON CONFLICT (destination) DO UPDATE SET n = n + excluded.n",
      -1, &putPending, NULL);
  enum { maxDestinations = 64 };
  const char *pendingName[maxDestinations];
  int pendingLength[maxDestinations], pendingCount[maxDestinations], pending = 0;

  long long events = 0;
  for (size_t i = 0; i < inputs.count; i++) events += sqlite3_value_int64(inputs.values[i * 3 + 1]);
  size_t n = inputs.count;
  size_t perCommit = (size_t)((double)n / (double)(commits > 0 ? commits : 1) + 0.5);
  size_t perCheckpoint = (size_t)((double)n / (double)(checkpoints > 0 ? checkpoints : 1) + 0.5);
  if (perCommit < 1) perCommit = 1;
  if (perCheckpoint < 1) perCheckpoint = 1;

  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  size_t a = 0, o = 0;
  for (size_t i = 0; i < n; i++) {
    if (i % perCommit == 0) exec(db, "BEGIN");
    insert(db, putInput, &inputs, i);
    for (size_t end = share(actions.count, i, n); a < end; a++) insert(db, putAction, &actions, a);
    for (size_t end = share(outbox.count, i, n); o < end; o++) {
      insert(db, putOutbox, &outbox, o);
      sqlite3_value *d = outbox.values[o * outbox.columns];
      const char *name = (const char *)sqlite3_value_text(d);
      int length = sqlite3_value_bytes(d), k = 0;
      while (k < pending && !(pendingLength[k] == length && memcmp(pendingName[k], name, (size_t)length) == 0)) k++;
      if (k == pending) {
        if (pending == maxDestinations) die(NULL, "destinations");
        pendingName[k] = name, pendingLength[k] = length, pendingCount[k] = 0, pending++;
      }
      pendingCount[k]++;
    }
    if ((i + 1) % perCheckpoint == 0 || i == n - 1) {
      for (size_t s = 0; s < states.count; s++) insert(db, putState, &states, s);
      if (sqlite3_step(putStream) != SQLITE_DONE) die(db, "stream_state");
      sqlite3_reset(putStream);
      sqlite3_bind_int64(putCheckpoint, 1, (sqlite3_int64)(i + 1));
      if (sqlite3_step(putCheckpoint) != SQLITE_DONE) die(db, "checkpoint");
      sqlite3_reset(putCheckpoint);
    }
    if ((i + 1) % perCommit == 0 || i == n - 1) {
      for (int k = 0; putPending && k < pending; k++) {
        sqlite3_bind_text(putPending, 1, pendingName[k], pendingLength[k], SQLITE_STATIC);
        sqlite3_bind_int(putPending, 2, pendingCount[k]);
        if (sqlite3_step(putPending) != SQLITE_DONE) die(db, "outbox_pending");
        sqlite3_reset(putPending);
      }
      pending = 0;
      exec(db, "COMMIT");
    }
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  sqlite3_finalize(putInput);
  sqlite3_finalize(putAction);
  sqlite3_finalize(putOutbox);
  sqlite3_finalize(putState);
  sqlite3_finalize(putStream);
  sqlite3_finalize(putCheckpoint);
  sqlite3_finalize(putPending);
  sqlite3_close(db);
  for (int k = 0; k < 3; k++) {
    char p[4200];
    snprintf(p, sizeof p, "%s%s", path, suffixes[k]);
    remove(p);
  }
  printf("%.0f\n", (double)events / seconds);
  return 0;
}
