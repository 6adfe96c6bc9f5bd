# snowseq: time-ordered, shard-routable 64-bit IDs generated inside PostgreSQL

EXTENSION = snowseq
EXTVERSION = 1.3
MODULE_big = snowseq
OBJS = \
	src/snowseq.o \
	src/sqlrun.o \
	src/tableguard.o \
	src/guc.o \
	src/shmem.o \
	src/timeutil.o \
	src/clock.o \
	src/reserve.o \
	src/statefile.o \
	src/rmgr.o \
	src/syncrep.o \
	src/admin.o \
	src/worker.o \
	src/status.o \
	src/gene.o \
	src/segment.o \
	src/counter.o \
	src/counter_cache.o \
	src/counter_def.o \
	src/counter_floor.o \
	src/counter_rights.o \
	src/serial.o \
	src/route.o \
	src/ff1.o \
	src/crypt.o \
	src/keyadmin.o \
	src/keystore.o \
	src/keyring.o \
	src/keyring_file.o \
	src/keyring_seal.o \
	src/pubtext.o \
	src/convert.o \
	src/auto_keys.o \
	src/scatter.o \
	src/uuid.o \
	src/backfill.o \
	src/testpoint.o \
	src/catcache.o \
	$(SHARDS_OBJS)

# elastic shards (src/shards/README.md): the router side, one folder per
# role, and what runs on shard servers (src/shards/server/)
SHARDS_FOLDERS = remote records operations replication transaction cleanup rebalance server
SHARDS_OBJS = \
	src/shards/remote/nodes.o \
	src/shards/remote/remote.o \
	src/shards/records/machine.o \
	src/shards/records/merge_records.o \
	src/shards/records/move_common.o \
	src/shards/records/move_states.o \
	src/shards/operations/check_shards.o \
	src/shards/operations/create_shards.o \
	src/shards/operations/merge.o \
	src/shards/operations/move.o \
	src/shards/operations/move_group.o \
	src/shards/operations/move_keep.o \
	src/shards/operations/move_parts.o \
	src/shards/operations/move_plan.o \
	src/shards/operations/move_schema.o \
	src/shards/operations/shard_ddl.o \
	src/shards/operations/shard_stats.o \
	src/shards/replication/move_repl.o \
	src/shards/transaction/merge_switch.o \
	src/shards/transaction/move_switch.o \
	src/shards/transaction/resolver.o \
	src/shards/transaction/twophase.o \
	src/shards/transaction/shard_ddl_xact.o \
	src/shards/cleanup/merge_cleanup.o \
	src/shards/cleanup/move_cleanup.o \
	src/shards/cleanup/move_orphans.o \
	src/shards/rebalance/rebalance_job.o \
	src/shards/rebalance/rebalance_loads.o \
	src/shards/rebalance/rebalance_plan.o \
	src/shards/rebalance/rebalance_rights.o \
	src/shards/rebalance/rebalance_state.o \
	src/shards/server/apply_error.o \
	src/shards/server/fence.o \
	src/shards/server/merge_mirror.o

# the full script of every release (so the upgrade test can compare a fresh
# install with an upgraded one) and the upgrade scripts between them
DATA = $(wildcard sql/snowseq--*.sql)

# The install script of this version and its update from the previous one
# are made from the SQL sources (CONTRIBUTING.md, "The SQL scripts"): the
# areas of sql/src/, in the order sql/src/areas declares, and the update's
# own part (sql/src/update--*.sql), which includes their blocks.  Both are
# committed (a release, make dist and a build without Perl have them);
# make sqlcheck, and test 064, fail when they differ from what the sources
# make.
SQL_PREV = 1.2
SQL_AREAS = $(patsubst %,$(srcdir)/sql/src/%.sql,$(shell cat $(srcdir)/sql/src/areas))
SQL_INSTALL = sql/snowseq--$(EXTVERSION).sql
SQL_UPDATE = sql/snowseq--$(SQL_PREV)--$(EXTVERSION).sql
SQL_BUILD = $(PERL) $(srcdir)/sql/build.pl

# -Bsymbolic and -fno-semantic-interposition: calls and globals inside the
# module bind directly, not through the PLT/GOT (measurable on the hot path)
SHLIB_LINK += -lxxhash -lmurmurhash -Wl,-Bsymbolic
# public IDs: AES-256 for FF1
SHLIB_LINK += -lcrypto
# moves run commands on other servers with libpq, as dblink and postgres_fdw do
SHLIB_LINK_INTERNAL = $(libpq)

# SQL behaviour (test/sql, test/expected), on a temporary instance with
# snowseq preloaded.  The instance is UTF8 with the C locale whatever the
# environment says: without a locale (LANG unset) initdb would make it
# SQL_ASCII, and the gene vectors of non-ASCII keys would not hold.
REGRESS = api errors gene route security counter counter_rights crypt pubtext convert scatter uuid backfill gene_uuid public_uuid auto_keys rebalance_plan rebalance_rights states
REGRESS_OPTS = --inputdir=$(srcdir)/test --temp-config=$(srcdir)/test/snowseq.conf \
	--temp-instance=./tmp_check_regress --encoding=UTF8 --no-locale

# races between sessions, step by step (test/specs, test/expected): each
# spec's expected output shows its interleaving
ISOLATION = $(patsubst $(srcdir)/test/specs/%.spec,%,$(sort $(wildcard $(srcdir)/test/specs/*.spec)))
ISOLATION_OPTS = --inputdir=$(srcdir)/test --temp-config=$(srcdir)/test/snowseq.conf \
	--temp-instance=./tmp_check_isolation --encoding=UTF8 --no-locale

TAP_TESTS = 1
PROVE_TESTS = $(or $(T),test/t/*.pl)
PROVE_FLAGS = -I ./test

PG_CPPFLAGS = -I$(srcdir)/src $(foreach d,$(SHARDS_FOLDERS),-I$(srcdir)/src/shards/$(d)) -I$(libpq_srcdir) -DSNOWSEQ_VERSION=\"$(EXTVERSION)\"
# a test build with snowseq's own Assert()s checked (ERROR when they fail)
# on a server built without assertions: make SNOWSEQ_DEBUG=1 (src/debug.h,
# included first in every source file)
ifdef SNOWSEQ_DEBUG
PG_CPPFLAGS += -DSNOWSEQ_DEBUG -include $(srcdir)/src/debug.h
endif
override PG_CFLAGS += -fno-semantic-interposition -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers

EXTRA_CLEAN = tmp_check_regress tmp_check_isolation results output_iso regression.diffs regression.out \
	$(wildcard src/shards/*.o src/shards/*.bc)

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

all: $(SQL_INSTALL) $(SQL_UPDATE)
$(SQL_INSTALL): $(srcdir)/sql/build.pl $(srcdir)/sql/src/areas $(SQL_AREAS)
	$(SQL_BUILD) install $(EXTVERSION) $(SQL_AREAS) > $@.new && mv $@.new $@
$(SQL_UPDATE): $(srcdir)/sql/build.pl $(srcdir)/sql/src/update--$(SQL_PREV)--$(EXTVERSION).sql $(SQL_AREAS)
	$(SQL_BUILD) update $(srcdir)/sql/src/update--$(SQL_PREV)--$(EXTVERSION).sql $(SQL_AREAS) > $@.new && mv $@.new $@

# the committed scripts are what the sources make
.PHONY: sqlcheck
sqlcheck:
	$(SQL_BUILD) install $(EXTVERSION) $(SQL_AREAS) | diff -u $(SQL_INSTALL) -
	$(SQL_BUILD) update $(srcdir)/sql/src/update--$(SQL_PREV)--$(EXTVERSION).sql $(SQL_AREAS) | diff -u $(SQL_UPDATE) -

# the TAP suites alone (T=test/t/NNN_x.pl for one file)
.PHONY: tapcheck
tapcheck:
	$(prove_installcheck)

# the PGXN distribution: the committed tree as a zip named by META.json's
# version (git archive: nothing that is not committed)
DISTVERSION = $(shell sed -n 's/^   "version": "\(.*\)",$$/\1/p' META.json)
.PHONY: dist
dist:
	git archive --format zip --prefix=$(EXTENSION)-$(DISTVERSION)/ -o $(EXTENSION)-$(DISTVERSION).zip HEAD

.PHONY: demo test bench package
demo:
	bash test/demo.sh
test:
	bash test/check.sh
bench:
	bash bench/run.sh
package:
	bash test/package.sh 15 17 18
