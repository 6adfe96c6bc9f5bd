/*
 * counter_floor.c
 *		The floors of named counters: the record of how far each counter
 *		issued, and the object its rights are granted on.
 *
 * A counter's floor is a sequence, snowseq_floor_<hash of its name>, in
 * the schema snowseq_state of its database.  It holds the highest value
 * (serials: period << 40 | number) its reservation's bound allows, written
 * before the bound is published.  A sequence is written outside the
 * transaction, WAL-logged, read by pg_dump as it stands (not as of the
 * dump's snapshot) and restored with setval(); it is no member of the
 * extension, so DROP EXTENSION leaves it, and its schema has a fixed name,
 * so an extension created again in any schema finds it.
 *
 * Only snowseq writes it.  The schema is made by snowseq, owned by the
 * bootstrap superuser, and no other role may create objects in it: a
 * database owner or a role with CREATE on the extension's schema cannot
 * plant a floor before a counter exists, drop one or lower it.  snowseq
 * trusts the schema only while a superuser owns it and nobody else may
 * create in it, and a floor only if it is a sequence of the schema's
 * owner; anything else is an ERROR, never adopted.
 *
 * A floor made for a definition that arrived without its record (a
 * restore of snowseq_counters alone, --data-only, or without this
 * schema) is made unwritten (is_called false): the counter is refused
 * until the dump's own setval() arrives or snowseq_counter_raise() says
 * where it stands.
 *
 * The counter's rights are USAGE grants on its floor, so they are
 * PostgreSQL's own: pg_dump carries them by role name, DROP ROLE refuses a
 * role that holds one, DROP OWNED takes them back.  Its owner is the role
 * granted USAGE WITH GRANT OPTION by the schema's owner.
 *
 * Catalogs of 1.1 and 1.2 kept the floors in the extension's schema
 * (CounterFloorFindLegacy); the update to 1.3 moves them here.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "commands/comment.h"
#include "common/cryptohash.h"
#include "common/sha2.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "counter_floor.h"
#include "sqlrun.h"

/* The name of a counter's floor sequence: snowseq_floor_ and a hash of its name. */
static void
CounterFloorName(const NameData *name, char *buf)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	char		hex[33];

	if (ctx == NULL || pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) NameStr(*name), strlen(NameStr(*name))) < 0 ||
		pg_cryptohash_final(ctx, digest, sizeof(digest)) < 0)
		elog(ERROR, "could not hash the name of counter \"%s\"", NameStr(*name));
	pg_cryptohash_free(ctx);
	hex_encode((const char *) digest, 16, hex);
	hex[32] = '\0';
	snprintf(buf, NAMEDATALEN, "snowseq_floor_%s", hex);
}

/*
 * Floors and their schema are no members of the extension, even when an
 * extension script (the update to 1.3) makes them: DROP EXTENSION must
 * leave them.  While creating_extension is off, PostgreSQL records no
 * membership; it is turned on again right after (an ERROR in between
 * leaves it off only for a transaction that is aborting, whose extension
 * command is over anyway).  Returns what to set it back to.
 */
static bool
CounterFloorNoMember(void)
{
	bool		saved = creating_extension;

	creating_extension = false;
	return saved;
}

/* ERROR: the floors' schema is not one snowseq can trust. */
static void
CounterFloorDistrust(const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("schema \"%s\" is not snowseq's to trust: %s", COUNTER_FLOOR_SCHEMA, why),
			 errdetail("It holds the records of how far named counters issued, which only snowseq may write."),
			 errhint("A superuser should make a superuser its owner and revoke CREATE on it from every other role, or drop it if it holds nothing of snowseq's.")));
}

/*
 * The owner of the floors' schema, after checking it may be trusted: a
 * superuser owns it and no other role may create objects in it.
 */
static Oid
CounterFloorTrust(Oid nsp)
{
	HeapTuple	tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nsp));
	Oid			owner;
	Datum		d;
	bool		isnull;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for schema %u", nsp);
	owner = ((Form_pg_namespace) GETSTRUCT(tup))->nspowner;
	if (!superuser_arg(owner))
	{
		ReleaseSysCache(tup);
		CounterFloorDistrust(psprintf("its owner %s is not a superuser",
									  GetUserNameFromId(owner, true) ? GetUserNameFromId(owner, true) : "(dropped)"));
	}
	d = SysCacheGetAttr(NAMESPACEOID, tup, Anum_pg_namespace_nspacl, &isnull);
	if (!isnull)
	{
		Acl		   *acl = DatumGetAclP(d);
		AclItem    *items = ACL_DAT(acl);

		for (int i = 0; i < ACL_NUM(acl); i++)
			if (items[i].ai_grantee != owner && (ACLITEM_GET_PRIVS(items[i]) & ACL_CREATE) != 0)
			{
				const char *who = items[i].ai_grantee == ACL_ID_PUBLIC ? "PUBLIC" :
					GetUserNameFromId(items[i].ai_grantee, true);

				ReleaseSysCache(tup);
				CounterFloorDistrust(psprintf("%s may create objects in it", who ? who : "a dropped role"));
			}
	}
	ReleaseSysCache(tup);
	return owner;
}

/*
 * Run the next statements as the owner of schema nsp (a superuser, the
 * only role that may write floors); saves what to switch back to.
 */
static void
CounterFloorAsOwner(Oid nsp, Oid *save_user, int *save_sec)
{
	ExtBecome(CounterFloorTrust(nsp), save_user, save_sec);
}

/*
 * The schema of the floors in this database, checked (CounterFloorTrust);
 * InvalidOid when there is none yet, unless create: then it is made, by
 * and for the bootstrap superuser, readable by everyone (USAGE: a floor's
 * own grants decide the rest).  Callers that may create hold a lock that
 * makes them one at a time (the definitions table's).
 */
Oid
CounterFloorSchema(bool create)
{
	Oid			nsp = get_namespace_oid(COUNTER_FLOOR_SCHEMA, true);
	Oid			save_user;
	int			save_sec;
	bool		member;

	if (OidIsValid(nsp))
	{
		(void) CounterFloorTrust(nsp);
		return nsp;
	}
	if (!create)
		return InvalidOid;
	member = CounterFloorNoMember();
	ExtBecome(BOOTSTRAP_SUPERUSERID, &save_user, &save_sec);
	SPI_connect();
	SpiRun("CREATE SCHEMA " COUNTER_FLOOR_SCHEMA, SPI_OK_UTILITY);
	SpiRun("GRANT USAGE ON SCHEMA " COUNTER_FLOOR_SCHEMA " TO PUBLIC", SPI_OK_UTILITY);
	SpiRun("COMMENT ON SCHEMA " COUNTER_FLOOR_SCHEMA " IS "
		   "'snowseq: how far each named counter issued (floor sequences) and who may use it; written by snowseq alone'",
		   SPI_OK_UTILITY);
	SPI_finish();
	SetUserIdAndSecContext(save_user, save_sec);
	creating_extension = member;
	CommandCounterIncrement();
	return get_namespace_oid(COUNTER_FLOOR_SCHEMA, false);
}

/*
 * A counter's floor in the floors' schema nsp, or InvalidOid; ERROR when
 * the name is taken by anything but a sequence of the schema's owner.
 */
Oid
CounterFloorFind(Oid nsp, const NameData *name)
{
	char		seqname[NAMEDATALEN];
	Oid			seq;
	HeapTuple	tup;
	Form_pg_class rel;
	bool		ok;

	if (!OidIsValid(nsp))
		return InvalidOid;
	CounterFloorName(name, seqname);
	seq = get_relname_relid(seqname, nsp);
	if (!OidIsValid(seq))
		return InvalidOid;
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(seq));
	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	rel = (Form_pg_class) GETSTRUCT(tup);
	ok = rel->relkind == RELKIND_SEQUENCE && rel->relowner == CounterFloorTrust(nsp);
	ReleaseSysCache(tup);
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("%s is not the floor of snowseq counter \"%s\"",
						quote_qualified_identifier(COUNTER_FLOOR_SCHEMA, seqname), NameStr(*name)),
				 errdetail("A floor is a sequence owned by the owner of schema %s.", COUNTER_FLOOR_SCHEMA),
				 errhint("A superuser should drop it; snowseq_counter_raise() then records where the counter stands.")));
	return seq;
}

/*
 * A counter's floor as 1.1 and 1.2 kept it, in the extension's schema, or
 * InvalidOid (also for anything there that is not a sequence).
 */
Oid
CounterFloorFindLegacy(Oid ext_nsp, const NameData *name)
{
	char		seqname[NAMEDATALEN];
	Oid			seq;

	CounterFloorName(name, seqname);
	seq = get_relname_relid(seqname, ext_nsp);
	if (!OidIsValid(seq) || get_rel_relkind(seq) != RELKIND_SEQUENCE)
		return InvalidOid;
	return seq;
}

/* A floor sequence, schema-qualified and quoted. */
char *
CounterFloorQualified(Oid seq)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(seq)), get_rel_name(seq));
}

/*
 * Read a floor (as its owner): whether snowseq wrote it, and
 * the highest value it covers (COUNTER_FLOOR_NONE: none yet).
 */
CounterFloorState
CounterFloorRead(Oid seq, int64 *value)
{
	Oid			save_user;
	int			save_sec;
	bool		isnull;
	bool		called;

	ExtBecome(ExtRelationOwner(seq), &save_user, &save_sec);
	SPI_connect();
	if (SPI_execute(psprintf("SELECT last_value, is_called FROM %s", CounterFloorQualified(seq)),
					true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not read floor sequence %u", seq);
	*value = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	called = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	SPI_finish();
	SetUserIdAndSecContext(save_user, save_sec);
	return called ? COUNTER_FLOOR_SET : COUNTER_FLOOR_AWAITING;
}

/* Write a floor (not undone by a rollback, like nextval()); it is then set. */
void
CounterFloorWrite(Oid seq, int64 value)
{
	Oid			save_user;
	int			save_sec;

	CounterFloorAsOwner(get_rel_namespace(seq), &save_user, &save_sec);
	DirectFunctionCall2(setval_oid, ObjectIdGetDatum(seq), Int64GetDatum(value));
	SetUserIdAndSecContext(save_user, save_sec);
}

/*
 * Make a counter's floor in the floors' schema nsp (see CounterFloorSchema),
 * set to value when set, else unwritten (a restored definition awaiting its
 * record); with replace, the one it has starts over (a restart: undone if
 * its transaction is; its grants stay).  An existing floor is returned as
 * it is, but set to value when set: the caller decides it may be lowered
 * (a new or restarted counter).  One maker at a time: the
 * caller holds a lock on the definitions to the end of the transaction.
 */
Oid
CounterFloorMake(Oid nsp, const NameData *name, const char *comment, bool set, int64 value,
				 bool replace)
{
	char		seqname[NAMEDATALEN];
	char	   *qualified;
	Oid			save_user;
	int			save_sec;
	bool		member;
	Oid			seq = CounterFloorFind(nsp, name);

	if (!OidIsValid(seq) || replace)
	{
		CounterFloorName(name, seqname);
		qualified = quote_qualified_identifier(COUNTER_FLOOR_SCHEMA, seqname);
		member = CounterFloorNoMember();
		CounterFloorAsOwner(nsp, &save_user, &save_sec);
		SPI_connect();
		/* RESTART gives the sequence new storage: a rollback brings the old back */
		if (OidIsValid(seq))
			SpiRun(psprintf("ALTER SEQUENCE %s RESTART WITH %d", qualified, COUNTER_FLOOR_NONE),
				   SPI_OK_UTILITY);
		else
			SpiRun(psprintf("CREATE SEQUENCE %s AS bigint MINVALUE %d START %d NO CYCLE",
							qualified, COUNTER_FLOOR_NONE, COUNTER_FLOOR_NONE), SPI_OK_UTILITY);
		SpiRun(psprintf("COMMENT ON SEQUENCE %s IS %s", qualified, quote_literal_cstr(comment)),
			   SPI_OK_UTILITY);
		SPI_finish();
		SetUserIdAndSecContext(save_user, save_sec);
		creating_extension = member;
		CommandCounterIncrement();
		seq = CounterFloorFind(nsp, name);
		if (!OidIsValid(seq))
			elog(ERROR, "could not find %s after creating it", qualified);
	}
	if (set)
		CounterFloorWrite(seq, value);
	return seq;
}

/* Drop a floor (a legacy one, once moved), as the owner of its schema or itself. */
void
CounterFloorDrop(Oid seq)
{
	char	   *qualified = CounterFloorQualified(seq);

	SPI_connect();
	SpiRun(psprintf("DROP SEQUENCE %s", qualified), SPI_OK_UTILITY);
	SPI_finish();
	CommandCounterIncrement();
}

/*
 * What a floor's comment says about the values it covers: the kind and,
 * for a serial, the format (its numbers only mean something in it).
 */
char *
CounterFloorComment(const NameData *name, bool serial, const char *format)
{
	if (serial)
		return psprintf("floor of snowseq serial \"%s\" in format '%s'", NameStr(*name), format);
	return psprintf("floor of snowseq counter \"%s\"", NameStr(*name));
}

/* The comment a floor has, or NULL. */
char *
CounterFloorCommentOf(Oid seq)
{
	return GetComment(seq, RelationRelationId, 0);
}
