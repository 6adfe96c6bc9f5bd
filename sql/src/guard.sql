--@block guard
-- ---- authority: tables snowseq alone writes (1.3) ----
-- The counter definitions and the keys are written by snowseq's functions
-- (as the tables' owner) and by roles with the owner's privileges (a
-- restore): a grant on them, which no role has, would let no role around
-- the functions' checks either.  ALWAYS: also under replication.
CREATE FUNCTION @extschema@.snowseq_guard() RETURNS trigger
	AS 'MODULE_PATHNAME', 'snowseq_guard'
	LANGUAGE C;
COMMENT ON FUNCTION @extschema@.snowseq_guard() IS
	'trigger: refuses changes of a table snowseq alone writes by roles without its owner''s privileges';
CREATE TRIGGER snowseq_guard
	BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.snowseq_counters
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.snowseq_guard();
ALTER TABLE @extschema@.snowseq_counters ENABLE ALWAYS TRIGGER snowseq_guard;
CREATE TRIGGER snowseq_guard
	BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.snowseq_key_store
	FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.snowseq_guard();
ALTER TABLE @extschema@.snowseq_key_store ENABLE ALWAYS TRIGGER snowseq_guard;
-- ---- end of authority: tables snowseq alone writes (1.3) ----

--@end
