/*
 * counter_rights.c
 *		Who may use, grant and drop a named counter.
 *
 * A counter's rights are PostgreSQL privileges on its floor sequence
 * (counter_floor.c): USAGE lets a role draw from the counter, raise it and
 * see its state; USAGE WITH GRANT OPTION, given by the floors' schema
 * owner to the role that created the counter, makes its owner, who may
 * grant and revoke it and drop it.  Being grants on a catalog object,
 * they are dumped and restored by role name, a role holding one cannot be
 * dropped (DROP OWNED takes them back), and GRANT and REVOKE on the floor
 * work as on any sequence.
 *
 * Catalogs of 1.2 kept an owner and an aclitem[] in the definition row,
 * written by whoever could write the table; 1.1 had no rights.  They are
 * read as they were until the update to 1.3 moves them onto the floors.
 *
 * A decision, once taken, is kept for one user id until a role, a
 * membership or a relation (a GRANT on a floor) changes: this file's
 * syscache callbacks count those changes.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/syscache.h"

#include "counter_floor.h"
#include "counter_rights.h"
#include "sqlrun.h"

/* Counts changes of roles, memberships and relations seen by this backend. */
static uint64 rights_generation = 1;
static bool rights_registered = false;

/* A role, a membership or a relation's privileges changed. */
static void
CounterRightsChanged(Datum arg, int cacheid, uint32 hashvalue)
{
	rights_generation++;
}

/*
 * The generation a rights decision taken now belongs to: it holds while
 * the generation stays the same.
 */
uint64
CounterRightsGeneration(void)
{
	if (!rights_registered)
	{
		CacheRegisterSyscacheCallback(AUTHOID, CounterRightsChanged, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, CounterRightsChanged, (Datum) 0);
		CacheRegisterSyscacheCallback(RELOID, CounterRightsChanged, (Datum) 0);
		rights_registered = true;
	}
	return rights_generation;
}

/* May user draw from the counter whose floor is floor_seq (USAGE on it)? */
bool
CounterRightsMayUse(Oid floor_seq, Oid user)
{
	return pg_class_aclcheck(floor_seq, user, ACL_USAGE) == ACLCHECK_OK;
}

/*
 * As a 1.2 catalog said: user has the privileges of the owner (is it, a
 * member of its role or a superuser), or USAGE granted to it, to a role
 * whose privileges it has, or to PUBLIC.
 */
bool
CounterRightsMayUseLegacy(Oid user, Oid owner, Acl *acl)
{
	if (has_privs_of_role(user, owner))
		return true;
	return acl != NULL && aclmask(acl, user, owner, ACL_USAGE, ACLMASK_ANY) != 0;
}

/* Is user an owner of the counter (may it grant USAGE on its floor)? */
bool
CounterRightsIsOwner(Oid floor_seq, Oid user)
{
	return pg_class_aclmask(floor_seq, user, ACL_GRANT_OPTION_FOR(ACL_USAGE), ACLMASK_ANY) != 0;
}

/* Make role an owner of the counter: USAGE WITH GRANT OPTION from the floor's owner. */
void
CounterRightsSetOwner(Oid floor_seq, Oid role)
{
	Oid			save_user;
	int			save_sec;
	Oid			owner = ExtRelationOwner(floor_seq);

	if (role == owner)
		return;
	ExtBecome(owner, &save_user, &save_sec);
	SPI_connect();
	SpiRun(psprintf("GRANT USAGE ON SEQUENCE %s TO %s WITH GRANT OPTION",
					CounterFloorQualified(floor_seq),
					quote_identifier(GetUserNameFromId(role, false))),
		   SPI_OK_UTILITY);
	SPI_finish();
	SetUserIdAndSecContext(save_user, save_sec);
	CommandCounterIncrement();
}

/*
 * GRANT or REVOKE USAGE on a counter's floor to or from grantee
 * (ACL_ID_PUBLIC: PUBLIC), as the current user, who must be an owner:
 * PostgreSQL's own rules then apply (a revoke takes back the grants this
 * user made).
 */
void
CounterRightsGrant(Oid floor_seq, Oid grantee, bool grant)
{
	const char *who = grantee == ACL_ID_PUBLIC ? "PUBLIC" :
		quote_identifier(GetUserNameFromId(grantee, false));

	SPI_connect();
	SpiRun(psprintf(grant ? "GRANT USAGE ON SEQUENCE %s TO %s" : "REVOKE USAGE ON SEQUENCE %s FROM %s",
					CounterFloorQualified(floor_seq), who),
		   SPI_OK_UTILITY);
	SPI_finish();
	CommandCounterIncrement();
}

/* ERROR: the current user may not use this counter. */
void
CounterRightsDenied(const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for counter \"%s\"", name),
			 errhint("The counter's owner may grant it with snowseq_grant_counter(name, role).")));
}

/*
 * The owner of the counter whose floor is floor_seq: the role granted
 * USAGE WITH GRANT OPTION by the floor's owner (the first, if several);
 * InvalidOid when none holds it (nobody but superusers may grant it).
 */
Oid
CounterRightsOwner(Oid floor_seq)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(floor_seq));
	Oid			owner = InvalidOid;
	Oid			relowner;
	Datum		d;
	bool		isnull;

	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	relowner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	d = SysCacheGetAttr(RELOID, tup, Anum_pg_class_relacl, &isnull);
	if (!isnull)
	{
		Acl		   *acl = DatumGetAclP(d);

		for (int i = 0; i < ACL_NUM(acl) && !OidIsValid(owner); i++)
		{
			AclItem    *item = &ACL_DAT(acl)[i];

			if (item->ai_grantor == relowner && item->ai_grantee != relowner &&
				(ACLITEM_GET_GOPTIONS(*item) & ACL_USAGE) != 0)
				owner = item->ai_grantee;
		}
	}
	ReleaseSysCache(tup);
	return owner;
}
