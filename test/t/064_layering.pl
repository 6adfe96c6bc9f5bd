# The layering of the C files, from the objects the build made
# (test/layering.sh): no file depends, through a chain of calls, on a file
# that depends on it, except the WAL log/redo pair (reserve.c logs an
# advance, rmgr.c redoes it into the reservations); every function of the
# core is in the file its prefix names; each header declares the API of
# the file it is named after.  The checker itself is shown to find a ring, a
# misplaced function and a header declaring another file's function.  No
# server needed.
use strict;
use warnings;
use File::Temp qw(tempdir);
use PostgreSQL::Test::Utils;
use Test::More;

my @objs = glob('src/*.o');
ok(@objs > 10, 'the build left its object files (' . scalar(@objs) . ')')
  or BAIL_OUT('build snowseq first: make');

# the tree
my ($out, $err);
my $ok = run_log([ 'bash', 'test/layering.sh', 'src' ], '>', \$out, '2>', \$err);
ok($ok, 'no cycle among src/ files but the WAL log/redo pair') or diag($out . $err);
like($out, qr/^allowed cycle: reserve rmgr$/m, 'the one cycle is reserve.c <-> rmgr.c');
unlike($out, qr/^(CYCLE|MISPLACED|HEADER|LAYER):/m, 'no other cycle, no misplaced function, no header declaring another file\'s, no folder using one above it');
like($out, qr/^statefile\s+->\s+(?!.*\bclock\b).*$/m, 'the state file layer does not call the clock');
like($out, qr/^shmem\s+->\s+guc$/m, 'shared state calls nothing above it but the settings');
unlike($out, qr/^worker\s+->.*\b(clock|segment|backfill|counter)\b/m,
	'the worker does not know the counter kinds: they register with the reservations');

like($out, qr/^sizes: \d+ files of at most 1000 lines, \d+ structs of at most 30 members$/m,
	'no C file or header over 1,000 lines, no struct over 30 members (issue 39)');
unlike($out, qr/^(LONG|STRUCT):/m, 'so none is reported');

# the sizes check finds a long file and wide structs, counts declarators
# (not lines), and is not fooled by comments, strings, function pointer
# parameters, preprocessor lines or a nested struct
{
	my $sdir = tempdir(CLEANUP => 1);
	my $cc = $ENV{CC} // 'cc';
	my $members = sub { join('', map { "\tint m$_;\n" } 1 .. $_[0]) };
	my %files = (
		'long.c' => "int long1(void);\n" . ("/* line */\n" x 999) . "int long1(void) { return 0; }\n",
		'short.c' => "int short1(void);\n" . ("/* line */\n" x 998) . "int short1(void) { return 0; }\n",
		'wide.h' => "typedef struct Wide\n{\n" . $members->(28)
		  . "\t/* not; a, member { } */\n\tvoid (*cb) (int a, int b);\n\tint x, y;\n} Wide;\n"
		  . "typedef struct\n{\n" . $members->(31) . "} Anon;\n",
		'fine.h' => "struct Fine {\n" . $members->(29)
		  . "#define FINE_ONE 1; /* ; */\n"
		  . "\tstruct { int p; int q; int r; } inner; /* ; ; ; */\n};\n"
		  . "static const char *const fine_text = \"a; b; c, { d }\";\n",
		'use.c' => "#include \"wide.h\"\n#include \"fine.h\"\nint use1(Wide *w, struct Fine *f) { return w->x + f->inner.p; }\n");
	for my $f (sort keys %files)
	{
		open(my $fh, '>', "$sdir/$f") or die;
		print $fh $files{$f};
		close($fh);
	}
	for my $f (grep { /\.c$/ } sort keys %files)
	{
		(my $o = $f) =~ s/\.c$/.o/;
		system($cc, '-c', "-I$sdir", '-o', "$sdir/$o", "$sdir/$f") == 0 or BAIL_OUT("cannot compile with $cc");
	}
	$ok = run_log([ 'bash', 'test/layering.sh', $sdir ], '>', \$out, '2>', \$err);
	ok(!$ok, 'a long file and a wide struct fail the check');
	like($out, qr/^LONG: \Q$sdir\E\/long\.c has 1001 lines \(at most 1000\)/m, 'a file of 1,001 lines is named');
	unlike($out, qr/^LONG: .*short\.c/m, 'one of 1,000 lines is not');
	like($out, qr/^STRUCT: \Q$sdir\E\/wide\.h:1: struct Wide has 31 members \(at most 30\)/m,
		'a struct of 31 declarators (two on one line, a function pointer) is named, a comment in it not counted');
	like($out, qr/^STRUCT: \Q$sdir\E\/wide\.h:\d+: struct Anon has 31 members/m,
		'an anonymous typedef struct is named after its typedef');
	unlike($out, qr/^STRUCT: .*(Fine|anonymous)/m,
		'30 members with a nested struct (one member), a preprocessor line, a comment and a string pass, and so does the nested struct');
	like($out, qr/^layering: no cycle/m, 'the other checks still run and pass');
}

# without the allowance, the pair itself is reported: the checker sees it
$ok = run_log([ 'bash', 'test/layering.sh', 'src' ], '>', \$out, '2>', \$err,
	init => sub { $ENV{LAYERING_ALLOWED} = 'none' });
ok(!$ok, 'with no cycle allowed the check fails');
like($out, qr/^CYCLE: reserve rmgr$/m, 'and names the ring with the calls that make it');
like($out, qr/^  reserve -> rmgr: RmgrLogAdvance$/m, 'the call from reserve.c into rmgr.c');

# a ring of three files and a misplaced function, built here
my $dir = tempdir(CLEANUP => 1);
my %src = (
	a => 'int b1(void); int a1(void) { return b1(); }',
	b => 'int c1(void); int b1(void) { return c1(); }',
	c => 'int a1(void); int c1(void) { return a1(); } int ClockNow(void) { return 0; }',
	d => 'int a1(void); int d1(void) { return a1(); }');
my $cc = $ENV{CC} // 'cc';
open(my $hh, '>', "$dir/clock.h") or die;
print $hh "extern int ClockNow(void);\nextern int a1(void);\n";
close($hh);
# a header outside the core, named after d.c, declaring b.c's function
open($hh, '>', "$dir/d.h") or die;
print $hh "extern int d1(void);\nextern int b1(void);\n";
close($hh);
for my $f (sort keys %src)
{
	open(my $fh, '>', "$dir/$f.c") or die;
	print $fh "$src{$f}\n";
	close($fh);
	system($cc, '-c', '-o', "$dir/$f.o", "$dir/$f.c") == 0 or BAIL_OUT("cannot compile with $cc");
}
$ok = run_log([ 'bash', 'test/layering.sh', $dir ], '>', \$out, '2>', \$err);
ok(!$ok, 'a ring of three files fails the check');
like($out, qr/^CYCLE: a b c$/m, 'the ring is named, d (which only calls in) is not part of it');
like($out, qr/^MISPLACED: ClockNow is in c\.c, its prefix names clock\.c$/m,
	'a function outside the file its prefix names is reported');
like($out, qr/^HEADER: clock\.h declares a1, defined in a$/m, 'a header declaring another file\'s function is reported');
like($out, qr/^HEADER: clock\.h declares ClockNow, defined in c$/m,
	'so is the misplaced function, which clock.c does not define');
like($out, qr/^HEADER: d\.h declares b1, defined in b$/m,
	'every header is checked, not only the core\'s: d.h declares a function of b.c');
unlike($out, qr/^HEADER: d\.h declares d1/m, 'and d.h may declare d.c\'s own');

# Folders are layers (src/shards/README.md): the core never uses nor
# includes elastic shards (but snowseq.c, the module's entry, calls their
# Init), the server side never the router side.  The tree keeps that; the
# check finds a core file calling into src/shards/ and a server file
# including a router header.
{
	my $ldir = tempdir(CLEANUP => 1);
	mkdir "$ldir/shards" or die;
	mkdir "$ldir/shards/server" or die;
	my %lsrc = ('clock' => 'int MoveStart(void); int ClockNow(void) { return MoveStart(); }',
		'shards/move' => 'int MoveStart(void) { return 1; }',
		'shards/server/fence' => "#include \"move.h\"\nint FenceNow(void) { return 2; }");
	open(my $mh, '>', "$ldir/shards/move.h") or die;
	print $mh "extern int MoveStart(void);\n";
	close($mh);
	for my $f (sort keys %lsrc)
	{
		open(my $fh, '>', "$ldir/$f.c") or die;
		print $fh "$lsrc{$f}\n";
		close($fh);
		system($cc, '-c', "-I$ldir/shards", '-o', "$ldir/$f.o", "$ldir/$f.c") == 0 or BAIL_OUT("cannot compile with $cc");
	}
	$ok = run_log([ 'bash', 'test/layering.sh', $ldir ], '>', \$out, '2>', \$err);
	ok(!$ok, 'a file using a layer above it fails the check');
	like($out, qr/^LAYER: clock\.c \(core\) uses move\.c \(shards\): MoveStart$/m, 'the core calling into src/shards/ is named');
	like($out, qr/^LAYER: fence \(server\) includes move\.h \(shards\)$/m, 'a server file including a router header is named');
}
# and the tree has files in each layer
ok(scalar(glob('src/shards/operations/*.o')) && scalar(glob('src/shards/server/*.o')), 'the build made objects in src/shards/\'s folders and src/shards/server/');
# The router side is grouped by role, one folder each (issue 39: the files
# lay flat, split by the phases of one move): src/shards/ itself holds its
# README and folders, no source, and each folder is one the README maps.
{
	my @flat = glob('src/shards/*.[ch]');
	is(join(' ', @flat), '', 'no C file lies flat in src/shards/: each is in the folder of its role');
	open(my $fh, '<', 'src/shards/README.md') or die;
	my $readme = do { local $/; <$fh> };
	close($fh);
	my @folders = map { m{src/shards/(\w+)/$} } glob('src/shards/*/');
	ok(@folders >= 6, 'the router side has its role folders: ' . join(' ', @folders));
	my @unmapped = grep { $readme !~ /^\| `$_\/` \|/m } @folders;
	is(join(' ', @unmapped), '', 'the README maps each folder (a row of its folder table)');
	my @unlisted = grep { my ($n) = m{/(\w+\.c)$}; $readme !~ /\b\Q$n\E\b/ } glob('src/shards/*/*.c');
	is(join(' ', @unlisted), '', 'and names each C file');
}
# The statements of two-phase commit on another server are written in one
# file, transaction/twophase.c (issue 39: the prepared transaction of the
# switch appeared in 6 files): every other file calls TwoPhasePrepare,
# TwoPhaseEnd, TwoPhaseExists, TwoPhaseList or TwoPhaseStatement.
sub twophase_writers
{
	my (%files) = @_;
	return grep { $files{$_} =~ /PREPARE\s+TRANSACTION|(?:COMMIT|ROLLBACK)\s+PREPARED|pg_prepared_xacts/ } sort keys %files;
}
{
	my %sources;
	for my $f (glob('src/*.c src/shards/*/*.c'))
	{
		open(my $fh, '<', $f) or die "$f: $!";
		my $text = do { local $/; <$fh> };
		close($fh);
		$text =~ s{/\*.*?\*/}{}gs;
		$sources{$f} = $text;
	}
	is(join(' ', twophase_writers(%sources)), 'src/shards/transaction/twophase.c',
		'two-phase commands are written in transaction/twophase.c alone');
	is(join(' ', twophase_writers(a => 'RemoteCommand(rc, psprintf("COMMIT PREPARED %s", g), "x");', b => 'TwoPhaseEnd(rc, g, true, "x");')), 'a',
		'and the check finds a file that writes one itself');
}

# Each state of a move and of a fence is named once in the C sources (the
# names array of its file) and is never a literal in SQL text: the SQL side
# takes it from that array (issue: a state lived in five places).
my %code;
for my $f (glob('src/*.c src/shards/*.c src/shards/*/*.c'))
{
	open(my $fh, '<', $f) or die "$f: $!";
	my $text = do { local $/; <$fh> };
	close($fh);
	$text =~ s{/\*.*?\*/}{}gs;	# comments may name a state
	$code{$f} = $text;
}
my %sets = (MoveStateNames => 'move state', FenceStateNames => 'fence state');
for my $array (sort keys %sets)
{
	my ($def) = grep { $code{$_} =~ /\b$array\[\]\s*=\s*\{/ } sort keys %code;
	ok(defined $def, "the $sets{$array}s are named in one array ($array)") or next;
	my ($list) = $code{$def} =~ /\b$array\[\]\s*=\s*\{(.*?)\}/s;
	my @names = $list =~ /"(\w+)"/g;
	ok(@names >= 4, "$array names " . scalar(@names) . " states");
	for my $name (@names)
	{
		# outside the names arrays (a move and a fence both have "block")
		my @c = map {
			(my $t = $code{$_}) =~ s/\b\w+StateNames\[\]\s*=\s*\{.*?\}//gs;
			my $n = () = $t =~ /"\Q$name\E"/g;
			($_) x $n
		} sort keys %code;
		my @sql = grep { $code{$_} =~ /'\Q$name\E'/ } sort keys %code;
		is(scalar(@c), 0, "$sets{$array} \"$name\" is a C string in ${def}'s array alone" . (@c ? ' (also ' . join(', ', @c) . ')' : ''));
		is(scalar(@sql), 0, "$sets{$array} \"$name\" is no SQL literal" . (@sql ? ' (' . join(', ', @sql) . ')' : ''));
	}
}

# A move's state has one writer and a declared machine (issue: a move's
# state was written at 14 places in 4 files; issue 39: a declared table of
# (state, step, next state)): MoveTransitions lists every step's change,
# MoveRecordStep alone sets the column and takes the next state from it.
{
	my ($common) = grep { m{src/shards/\w+/move_common\.c$} } sort keys %code;
	my $text = defined $common ? $code{$common} : '';
	my ($list) = $text =~ /\bMoveTransitions\[\]\s*=\s*\{(.*?)\n\};/s;
	my @rows = defined $list ? $list =~ /\{(MOVE_STATE_\w+),\s*(MOVE_STEP_\w+),\s*(MOVE_STATE_\w+)\}/g : ();
	ok(@rows >= 3 * 10, 'the steps of a move are one declared table of (state, step, next state) (MoveTransitions): ' . (@rows / 3) . ' rows');
	my %to = map { $rows[3 * $_ + 2] => 1 } 0 .. $#rows / 3;
	is(join(',', sort keys %to), join(',', sort map { "MOVE_STATE_\U$_" } qw(copy switch switched revertable done reverted failed rollback)),
		'every state a move enters after prepare is the next state of a declared step');
	my @writers = grep { $code{$_} =~ /\bstate = \$\d|SET state\b/ } grep { m{src/shards/(?!server/)\w+/[^/]+\.c$} && !m{merge} } sort keys %code;
	is(join(',', @writers), 'src/shards/records/move_common.c', 'one file of the moves writes their state column');
	my ($writer) = $text =~ /\nMoveRecordStep\(Move \*m,[^{]*\{(.*?)\n\}/s;
	like($writer // '', qr/to = MachineNext\(&MoveMachine, from, step\)/, 'and its writer takes the next state from the table, refusing a step it does not declare');
	my @named = grep { $code{$_} =~ /\bMoveRecordStep(?:Error)?\(\w+, MOVE_STATE_/ } sort keys %code;
	is(scalar(@named), 0, 'no caller names the state a move goes to, only its step');
}

# A merge's state likewise (issue 39: merges wrote their state column from
# three files, as strings): MergeTransitions declares (state, step, next
# state), MergeRecordStep alone sets the column and takes the next state from
# the table.
{
	my ($records) = grep { m{src/shards/\w+/merge_records\.c$} } sort keys %code;
	my $text = defined $records ? $code{$records} : '';
	my ($list) = $text =~ /\bMergeTransitions\[\]\s*=\s*\{(.*?)\n\};/s;
	my @rows = defined $list ? $list =~ /\{(MOVE_STATE_\w+),\s*(MERGE_STEP_\w+),\s*(MOVE_STATE_\w+)\}/g : ();
	ok(@rows >= 3 * 8, 'the steps of a merge are one declared table of (state, step, next state) (MergeTransitions): ' . (@rows / 3) . ' rows');
	my %to = map { $rows[3 * $_ + 2] => 1 } 0 .. $#rows / 3;
	is(join(',', sort keys %to), join(',', sort map { "MOVE_STATE_\U$_" } qw(copy switch switched done failed rollback)),
		'every state a merge enters after prepare is the next state of a declared step');
	my @writers = grep { $code{$_} =~ /\bstate = \$\d|SET state\b/ } grep { m{src/shards/\w+/merge[^/]*\.c$} } sort keys %code;
	is(join(',', @writers), 'src/shards/records/merge_records.c', 'one file of the merges writes their state column');
	my ($writer) = $text =~ /\nMergeRecordStep\(Move \*m,[^{]*\{(.*?)\n\}/s;
	like($writer // '', qr/next = MachineNext\(&MergeMachine, from, step\)/,
		'and its writer takes the next state from the table, for the committed state and the step');
	my @strings = grep { $code{$_} =~ /\bMERGE_(?:PREPARE|COPY|SWITCH|SWITCHED|DONE|FAILED|ROLLBACK)\b/ } sort keys %code;
	is(scalar(@strings), 0, 'no merge code names a state by its stored string' . (@strings ? ' (' . join(', ', @strings) . ')' : ''));
}

# What a state is is said once, derived from the machines (src/shards/
# machine.c): what is over (entered, never left) and which step a state is
# the one of.  C takes the states over from the tables (MoveStatesOver,
# MergeStatesOver: no list of its own, issue 39); SQL asks the predicates,
# functions in C over the same tables (test/sql/states.sql prints what each
# says of every label), and no SQL predicate lists states itself.
{
	my $install = slurp_file('sql/snowseq--1.3.sql');
	my @preds;
	while ($install =~ /CREATE FUNCTION \@extschema\@\.(snowseq_(?:move|merge|rebalance|rebalance_step)_(?:is|has)_\w+)\(state [\w\@.]+\)\s*RETURNS boolean\s*(AS '[^']*', '\w+'\s*LANGUAGE C)?/g)
	{
		push @preds, $1 . (defined $2 ? '' : ' (not C)');
	}
	ok(@preds >= 12, 'the install script has the predicates of the states: ' . join(', ', @preds));
	is(scalar(grep { /not C/ } @preds), 0, 'each is a C function over the machine, not a list of states');
	for my $fn (qw(MachineOver MachineEnters))
	{
		my @users = grep { $code{$_} =~ /\b$fn\(/ && !m{/machine\.c$} } sort keys %code;
		ok(@users >= 2, "the predicates derive from the tables ($fn): " . join(', ', @users));
	}
	my @lists = grep { $code{$_} =~ /MoveStateArray\(MOVE_STATE_DONE, MOVE_STATE_FAILED, (?:MOVE_STATE_REVERTED, )?MOVE_STATE_NONE\)|MERGE_NOT_OVER/ } sort keys %code;
	is(join(',', @lists), '', 'no C file lists the states over itself (MoveStatesOver, MergeStatesOver)');
	# each table gives one next state for a state and a step (MachineNext
	# takes the first row that matches)
	for my $t ([ 'MoveTransitions', 'src/shards/records/move_common.c' ], [ 'MergeTransitions', 'src/shards/records/merge_records.c' ],
		[ 'RebalanceRunTransitions', 'src/shards/rebalance/rebalance_state.c' ], [ 'RebalanceStepTransitions', 'src/shards/rebalance/rebalance_state.c' ])
	{
		my ($list) = ($code{ $t->[1] } // '') =~ /\b$t->[0]\[\]\s*=\s*\{(.*?)\n\};/s;
		my @rows = defined $list ? $list =~ /\{(\w+),\s*(\w+),\s*\w+\}/g : ();
		my (%seen, @twice);
		for (my $i = 0; $i < @rows; $i += 2)
		{
			push @twice, "$rows[$i] by $rows[$i + 1]" if $seen{"$rows[$i] $rows[$i + 1]"}++;
		}
		ok(@rows >= 2 * 6 && !@twice, "$t->[0]: one next state for each state and step" . (@twice ? ' (twice: ' . join(', ', @twice) . ')' : ''));
	}
	# each predicate of move_states.c asks its machine
	my @bodies = ($code{'src/shards/records/move_states.c'} // '') =~ /\n(snowseq_\w+)\(PG_FUNCTION_ARGS\)\n\{(.*?)\n\}/sg;
	my @own;
	for (my $i = 0; $i < @bodies; $i += 2)
	{
		push @own, $bodies[$i] unless $bodies[ $i + 1 ] =~ /\bMachine(?:Over|Enters)\(/;
	}
	ok(@bodies >= 2 * 8 && !@own, 'each predicate of move_states.c asks its machine (MachineOver, MachineEnters): ' . (@bodies / 2)
		. (@own ? ' (not: ' . join(', ', @own) . ')' : ''));
	my @walks = grep { $code{$_} =~ /\b\w*Transitions\[i\]\.(?:from|to)\b/ } sort keys %code;
	is(join(',', @walks), '', 'no file walks a machine\'s rows itself (machine.c does)');
}

# A rebalance run's state and its steps' likewise (issue 39: the driver
# and the jobs wrote 'running', 'stopped', 'abandoned', 'done', 'failed' and
# 'planned' at eleven places): rebalance_state.c declares both machines,
# their names arrays follow the enum types, and the SQL sources store no
# state they name themselves, only what snowseq_rebalance_next returns.
sub stored_rebalance_states
{
	my ($sql, $labels) = @_;
	my $l = join('|', map { quotemeta } @$labels);
	my @hits;
	while ($sql =~ /((?::=|\bTHEN|\bELSE|\bSET\s+state\s*=|,\s*state\s*=|\bCOALESCE\s*\([^,()]*,)\s*'(?:$l)')/g)
	{
		push @hits, $1 =~ s/\s+/ /gr;
	}
	# a new row's state as a literal among its values
	while ($sql =~ /(\b(?:VALUES|ROW)\s*\([^;]*?'(?:$l)'[^;]*?\))/g)
	{
		push @hits, substr($1 =~ s/\s+/ /gr, 0, 60);
	}
	return @hits;
}
{
	my ($file) = grep { m{src/shards/\w+/rebalance_state\.c$} } sort keys %code;
	my $text = defined $file ? $code{$file} : '';
	my %arrays = (RebalanceStateNames => 'snowseq_rebalance_state', RebalanceStepStateNames => 'snowseq_rebalance_step_state');
	my $sources = join("\n", map { sql_text($_) } glob('sql/src/rebalance*.sql'));
	my @all;
	for my $array (sort keys %arrays)
	{
		my ($list) = $text =~ /\b$array\[\]\s*=\s*\{(.*?)\}/s;
		my @names = defined $list ? $list =~ /"(\w+)"/g : ();
		my ($def) = $sources =~ /CREATE TYPE \@extschema\@\.$arrays{$array} AS ENUM\s*\((.*?)\);/s;
		my @labels = defined $def ? $def =~ /'([^']+)'/g : ();
		ok(@names >= 4 && join(',', @names) eq join(',', @labels),
			"$array (rebalance_state.c) names the labels of $arrays{$array}, in order (" . join(',', @names) . ')');
		push @all, @labels;
	}
	for my $table (qw(RebalanceRunTransitions RebalanceStepTransitions))
	{
		my ($list) = $text =~ /\b$table\[\]\s*=\s*\{(.*?)\n\};/s;
		my @rows = defined $list ? $list =~ /\{((?:RUN|STEP)_\w+),\s*((?:RUN|STEP)_\w+),\s*((?:RUN|STEP)_\w+)\}/g : ();
		ok(@rows >= 3 * 6, "the steps of a rebalance " . ($table =~ /Run/ ? 'run' : 'step') . " are one declared table of (state, step, next state) ($table): " . (@rows / 3) . ' rows');
	}
	my %uniq = map { $_ => 1 } @all;
	# nor does the C: it asks the predicates too
	my @c = grep { my $f = $_; grep { $code{$f} =~ /'\Q$_\E'/ } keys %uniq } sort keys %code;
	is(join(', ', @c), '', 'no C file names a rebalance state in its SQL');
	my @hits = stored_rebalance_states($sources, [ sort keys %uniq ]);
	is(scalar(@hits), 0, 'the SQL sources store no rebalance state they name, only snowseq_rebalance_next\'s' . (@hits ? ': ' . join('; ', @hits) : ''));
	my @to = $sources =~ /\bstate = \@extschema\@\.snowseq_rebalance_to\((?:r|st)\.state, /g;
	is(scalar(@to), 2, 'save_run and save_steps store a given state checked against the committed one (snowseq_rebalance_to)');
	my @driven = $sources =~ /\bsnowseq_rebalance_is_running\(\$1\.state\)\s+AND\s+\@extschema\@\.snowseq_rebalance_runner_alive/g;
	is(scalar(@driven), 1, 'a run driven by a live process is one function (snowseq_rebalance_driven)');
	# the check itself, on what the sources wrote before
	ok(scalar(stored_rebalance_states(q{state = CASE WHEN r.stop IS NULL THEN r.state WHEN r.stop OPERATOR(pg_catalog.=) 'abandon' THEN 'abandoned' ELSE 'stopped' END,}, [ sort keys %uniq ])) == 2
		  && scalar(stored_rebalance_states(q{	s.state := 'done';}, [ sort keys %uniq ])) == 1
		  && scalar(stored_rebalance_states(q{SET job_role = NULL, state = 'running', stop = NULL}, [ sort keys %uniq ])) == 1
		  && scalar(stored_rebalance_states(q{COALESCE(s.state, 'planned'), s.move_id}, [ sort keys %uniq ])) == 1
		  && scalar(stored_rebalance_states(q{ROW(run.run_id, p.rows, 'planned', NULL)::x}, [ sort keys %uniq ])) == 1
		  && scalar(stored_rebalance_states(q{IF run.state OPERATOR(pg_catalog.=) 'running' THEN}, [ sort keys %uniq ])) == 0,
		'the check finds a state stored by a CASE, an assignment, a SET, a COALESCE and a row, and passes a state compared');
}

# Cleanup finds what moves made by their records (snowseq_move_objects),
# never by their names (issue 30): no regular expression, LIKE or SIMILAR
# TO pattern in the SQL text of any C file, and the kinds of recorded
# objects are one names array whose order the SQL enum type follows.
sub name_patterns
{
	my ($text) = @_;
	my @hits;
	for my $line (split /\n/, $text)
	{
		push @hits, $line
		  if $line =~ /OPERATOR\(pg_catalog\.!?~~?\*?\)|[^\w]!?~~?\*?\s*'|\b(?:NOT\s+)?I?LIKE\s+'|\bSIMILAR\s+TO\b|\bregexp_\w+\s*\(|\bsubstring\s*\([^)]*'\^|\bstarts_with\s*\(\s*(?:\w+\.)?(?:\w*name|gid)\b/i;
	}
	return @hits;
}
# One comparison is known and bounded: the table-sync slots of a move that
# began under 1.2, which recorded none, are those whose names begin with
# pg_<its subscription oid>_sync_ (MoveDropSlots); it goes with the update
# from 1.2.
my $legacy_sync = qr/starts_with\(slot_name::pg_catalog\.text, \$2::pg_catalog\.text\)",$/;
for my $f (sort keys %code)
{
	my @hits = grep { !/$legacy_sync/ } name_patterns($code{$f});
	is(scalar(@hits), 0, "$f matches no name against a pattern" . (@hits ? ":\n" . join("\n", @hits) : ''));
}
# the check itself: the search for orphans by name that 1.2 had fails it
ok(scalar(name_patterns(q{"FROM pg_catalog.pg_replication_slots WHERE slot_name::text OPERATOR(pg_catalog.~) '^snowseq_move_' "})) == 1
	  && scalar(name_patterns(q{"WHERE slot_name OPERATOR(pg_catalog.=) %s OR slot_name::text OPERATOR(pg_catalog.~) %s"})) == 1
	  && scalar(name_patterns(q{"WHERE gid ~ '^snowseq_move_'"})) == 1
	  && scalar(name_patterns(q{"WHERE relname LIKE 'snowseq_move_%'"})) == 1
	  && scalar(name_patterns(q{"WHERE pg_catalog.starts_with(pubname::pg_catalog.text, 'snowseq_move_')"})) == 1
	  && scalar(name_patterns(q{"SELECT slot_name FROM pg_catalog.pg_replication_slots WHERE slot_name OPERATOR(pg_catalog.=) ANY (%s)"})) == 0,
	'the pattern check finds a regular expression or LIKE over names, and nothing in an equality');
{
	my ($def) = grep { $code{$_} =~ /\bMoveObjectNames\[\]\s*=\s*\{/ } sort keys %code;
	my ($list) = defined $def ? $code{$def} =~ /\bMoveObjectNames\[\]\s*=\s*\{(.*?)\}/s : ();
	my @names = defined $list ? $list =~ /"([^"]+)"/g : ();
	ok(@names >= 8, 'the kinds of recorded objects are named in one array (MoveObjectNames): ' . join(', ', @names));
	for my $script ('sql/snowseq--1.3.sql', 'sql/snowseq--1.2--1.3.sql')
	{
		open(my $fh, '<', $script) or die "$script: $!";
		my $sql = do { local $/; <$fh> };
		close($fh);
		my ($labels) = $sql =~ /CREATE TYPE \@extschema\@\.snowseq_move_object_kind AS ENUM\s*\((.*?)\);/s;
		my @labels = defined $labels ? $labels =~ /'([^']+)'/g : ();
		is(join(',', @labels), join(',', @names), "$script: the labels of snowseq_move_object_kind are MoveObjectNames, in order");
	}
	# and the cleanup policies of the records: MoveCleanupPolicyNames, the labels of snowseq_cleanup_policy
	my ($pdef) = grep { $code{$_} =~ /\bMoveCleanupPolicyNames\[\]\s*=\s*\{/ } sort keys %code;
	my ($plist) = defined $pdef ? $code{$pdef} =~ /\bMoveCleanupPolicyNames\[\]\s*=\s*\{(.*?)\}/s : ();
	my @policies = defined $plist ? $plist =~ /"([^"]+)"/g : ();
	ok(@policies >= 3, 'the cleanup policies of records are named in one array (MoveCleanupPolicyNames): ' . join(', ', @policies));
	for my $script ('sql/snowseq--1.3.sql', 'sql/snowseq--1.2--1.3.sql')
	{
		open(my $fh, '<', $script) or die "$script: $!";
		my $sql = do { local $/; <$fh> };
		close($fh);
		my ($labels) = $sql =~ /CREATE TYPE \@extschema\@\.snowseq_cleanup_policy AS ENUM\s*\((.*?)\);/s;
		my @labels = defined $labels ? $labels =~ /'([^']+)'/g : ();
		is(join(',', @labels), join(',', @policies), "$script: the labels of snowseq_cleanup_policy are MoveCleanupPolicyNames, in order");
	}
}

# The records of moves are read and written as their owner (a router
# administrator that moves holds no right on them): in the move files, no
# statement run with SpiRun, SpiValue or their kin names snowseq_moves,
# snowseq_move_objects or snowseq_status; each goes through MoveRecordsRun
# or MoveRecordsValue.  A look-up of a table in the catalog (to_regclass,
# ::regclass) reads none.
sub call_args
{
	my ($text, $fn) = @_;
	my @out;
	while ($text =~ /\b$fn\s*\(/g)
	{
		my ($i, $depth, $in_str) = (pos($text), 1, 0);
		my $start = $i;
		while ($i < length($text) && $depth > 0)
		{
			my $c = substr($text, $i, 1);
			if ($in_str) { if ($c eq '\\') { $i++ } elsif ($c eq '"') { $in_str = 0 } }
			elsif ($c eq '"') { $in_str = 1 }
			elsif ($c eq '(') { $depth++ }
			elsif ($c eq ')') { $depth-- }
			$i++;
		}
		push @out, substr($text, $start, $i - $start - 1);
		pos($text) = $i;
	}
	return @out;
}
sub records_as_caller
{
	my ($text) = @_;
	return grep { /snowseq_(?:moves|move_objects|status)\b/ && !/to_regclass\(|::pg_catalog\.regclass/ }
	  map { call_args($text, $_) } qw(SpiRun SpiRunArgs SpiRunParams SpiValue SpiValueParams);
}
for my $f (grep { m{src/shards/\w+/(?:move|merge|resolver)} } sort keys %code)
{
	my @hits = records_as_caller($code{$f});
	is(scalar(@hits), 0, "$f reads and writes the records of moves as their owner" . (@hits ? ":\n" . join("\n", @hits) : ''));
}
ok(scalar(records_as_caller(q{SpiRun(psprintf("UPDATE %s SET a = 1", MoveExt(m, "snowseq_moves")), SPI_OK_UPDATE);}))
	  == 1 && scalar(records_as_caller(q{v = SpiValue(m->cxt, psprintf("SELECT node_id FROM %s", MoveExt(m, "snowseq_status")));})) == 1
	  && scalar(records_as_caller(q{MoveRecordsRun(m->ext, psprintf("UPDATE %s SET a = (f(1))", MoveExt(m, "snowseq_moves")), 0);})) == 0,
	'the check finds a statement on the records run as the caller, and passes one run as their owner');

# A value goes into a statement as a parameter ($1, SQL_ARGS), never quoted
# into its text (issue 30): a quote_literal is left only in a utility
# statement, which takes no parameters (SET, CREATE, ALTER, DROP, COMMENT
# ON, GRANT, REVOKE, PREPARE TRANSACTION, COMMIT and ROLLBACK PREPARED).  A C statement that quotes a literal is judged by the
# first SQL text it holds.
sub c_statements
{
	my ($text) = @_;
	my (@out, $cur, $in_str, $depth);
	($cur, $in_str, $depth) = ('', 0, 0);
	for (my $i = 0; $i < length($text); $i++)
	{
		my $c = substr($text, $i, 1);
		$cur .= $c;
		if ($in_str)
		{
			if ($c eq '\\') { $cur .= substr($text, ++$i, 1) }
			elsif ($c eq '"') { $in_str = 0 }
		}
		elsif ($c eq '"') { $in_str = 1 }
		elsif ($c eq "'") { $cur .= substr($text, $i + 1, 2); $i += 2; $i++, $cur .= "'" if substr($cur, -2, 1) eq '\\' }
		elsif ($c eq '(') { $depth++ }
		elsif ($c eq ')') { $depth-- }
		elsif (($c eq ';' && $depth <= 0) || $c eq '{' || $c eq '}') { push @out, $cur; $cur = ''; $depth = 0 }
	}
	return @out;
}
# The SQL texts of a C statement: each run of adjacent string literals, as C
# joins them.
sub c_texts
{
	my ($st) = @_;
	my @texts;
	while ($st =~ /((?:"(?:[^"\\]|\\.)*"\s*)+)/g)
	{
		(my $t = $1) =~ s/"\s*"//g;
		$t =~ s/^"|"\s*$//g;
		push @texts, $t;
	}
	return @texts;
}
my $utility = qr/^\s*(?:SET|CREATE|ALTER|DROP|COMMENT\s+ON|GRANT|REVOKE|PREPARE\s+TRANSACTION|(?:COMMIT|ROLLBACK)\s+PREPARED)\b/;
sub quoted_values
{
	my ($text) = @_;
	my @hits;
	for my $st (c_statements($text))
	{
		my @texts = c_texts($st);
		(my $code = $st) =~ s/"(?:[^"\\]|\\.)*"//g;
		my $bad;
		# a value quoted in C: every SQL statement of the texts that takes a
		# value (%s) is a utility statement, and there is one (fragments
		# that begin with no keyword, such as ", %s", are judged by the
		# statement around them)
		if ($code =~ /\bquote_literal(?:_cstr)?\s*\(/)
		{
			my @parts = grep { /%s/ && /^\s*[A-Z]{2,}\b/ } map { split /;/ } @texts;
			$bad = !@parts || grep { !/$utility/ } @parts;
		}
		# or quoted in the SQL text itself: '%s' in a query
		$bad ||= grep { /^\s*(?:SELECT|INSERT|UPDATE|DELETE|WITH)\b/ && /'%s'/ } @texts;
		next unless $bad;
		(my $line = $st) =~ s/\s+/ /g;
		push @hits, substr($line, 0, 160);
	}
	return @hits;
}
for my $f ((sort keys %code), glob('src/*.h src/shards/*.h src/shards/*/*.h'))
{
	my $text = $code{$f};
	if (!defined $text)
	{
		open(my $fh, '<', $f) or die "$f: $!";
		$text = do { local $/; <$fh> };
		close($fh);
		$text =~ s{/\*.*?\*/}{}gs;
	}
	my @hits = quoted_values($text);
	is(scalar(@hits), 0, "$f quotes no value into a query" . (@hits ? ":\n" . join("\n", @hits) : ''));
}
ok(scalar(quoted_values(q{v = RemoteValue(rc, psprintf("SELECT oid FROM pg_catalog.pg_subscription WHERE subname OPERATOR(pg_catalog.=) %s", quote_literal_cstr(name)), "look up");})) == 1
	  && scalar(quoted_values(q{lit = quote_literal_cstr(name);})) == 1
	  && scalar(quoted_values(q{SpiRun(psprintf("SET LOCAL x = 1; SELECT f(%s)", quote_literal_cstr(v)), 0);})) == 1
	  && scalar(quoted_values(q{v = c ? "DROP" : RemoteValue(rc, psprintf("SELECT %s", quote_literal_cstr(v)), "get");})) == 1
	  && scalar(quoted_values(q{SpiRun(psprintf("SELECT f('%s')", v), 0);})) == 1
	  && scalar(quoted_values(q{RemoteCommand(rc, psprintf("COMMENT ON TABLE %s IS %s", t, quote_literal_cstr(mark)), "mark"); x = ';';})) == 0
	  && scalar(quoted_values(q{sql = psprintf("SET LOCAL lock_timeout = %d; " "CREATE TRIGGER t BEFORE INSERT ON %s " "FOR EACH ROW EXECUTE FUNCTION %s(%s)", 5, t, f, quote_literal_cstr(c));})) == 0
	  && scalar(quoted_values(q{v = RemoteValueParams(rc, "SELECT oid FROM pg_catalog.pg_subscription WHERE subname OPERATOR(pg_catalog.=) $1::pg_catalog.name", SQL_ARGS(name), "look up");})) == 0,
	'the check finds a value quoted into a query (also after a SET, in one arm of a condition, or between quotes in the SQL), and passes a utility statement and a parameter');

# OPERATOR(schema.op) takes the precedence of any other operator, whatever
# op is: a OPERATOR(pg_catalog.+) b OPERATOR(pg_catalog.*) c is (a + b) * c.
# In the scripts and in SQL built in C, an operand between a lower and a
# higher operator of that form is parenthesized.
sub precedence_traps
{
	my ($text) = @_;
	my %rank = ('=' => 1, '<>' => 1, '<' => 1, '>' => 1, '<=' => 1, '>=' => 1,
		'+' => 2, '-' => 2, '*' => 3, '/' => 3, '%' => 3);
	my @hits;
	while ($text =~ /OPERATOR\(pg_catalog\.([^)\s]+)\)\s+((?:[\w.\$\[\]']|\([^()]*\))+)\s+OPERATOR\(pg_catalog\.([^)\s]+)\)/g)
	{
		my ($lo, $operand, $hi) = ($1, $2, $3);
		push @hits, "$lo $operand $hi"
		  if defined $rank{$lo} && defined $rank{$hi} && $rank{$hi} > $rank{$lo};
		pos($text) = $-[3] - length('OPERATOR(pg_catalog.');
	}
	return @hits;
}
for my $f ((sort keys %code), 'sql/snowseq--1.3.sql', 'sql/snowseq--1.2--1.3.sql')
{
	my $text = $code{$f};
	if (!defined $text)
	{
		open(my $fh, '<', $f) or die "$f: $!";
		$text = do { local $/; <$fh> };
		close($fh);
	}
	my @hits = precedence_traps($text);
	is(scalar(@hits), 0, "$f: no operand between a lower and a higher OPERATOR() unparenthesized" . (@hits ? ': ' . join('; ', @hits) : ''));
}
ok(scalar(precedence_traps('x := a OPERATOR(pg_catalog.+) b OPERATOR(pg_catalog.*) c;')) == 1
	  && scalar(precedence_traps('x := a OPERATOR(pg_catalog.+) (b OPERATOR(pg_catalog.*) c);')) == 0
	  && scalar(precedence_traps('x := a OPERATOR(pg_catalog.-) b OPERATOR(pg_catalog.+) 1;')) == 0
	  && scalar(precedence_traps('WHERE a OPERATOR(pg_catalog.=) b OPERATOR(pg_catalog.-) 1')) == 1,
	'the precedence check finds a + b * c and a = b - 1 written with OPERATOR(), and passes (a + b) - 1');

# The install script is written in its final shape: it creates each object
# once and never alters or drops what it created (the update scripts carry
# the history).  The one ALTER it needs is ENABLE ALWAYS TRIGGER, which
# CREATE TRIGGER cannot say.
sub script_history
{
	my ($sql) = @_;
	my (@hits, %made);
	$sql =~ s/--[^\n]*//g;
	for my $stmt (split /;\s*\n/, $sql)
	{
		$stmt =~ s/^\s+//;
		if ($stmt =~ /^(DROP|CREATE OR REPLACE)\s+(\w+)\s+(\S+)/i
			|| ($stmt =~ /^ALTER\s+(\w+)\s+(\S+)/i && $stmt !~ /^ALTER TABLE \S+ ENABLE ALWAYS TRIGGER \w+$/i))
		{
			push @hits, (split /\n/, $stmt)[0];
		}
		elsif ($stmt =~ /^CREATE\s+(?:UNIQUE\s+)?(TABLE|VIEW|TYPE|INDEX|SCHEMA|SEQUENCE)\s+(\S+?)(?:\s|\()/i)
		{
			my ($kind, $name) = (lc($1), lc($2));
			$name =~ s/^\@extschema\@\.//;
			my $key = "$kind $name";
			push @hits, "$key created twice" if $made{$key}++;
		}
	}
	return @hits;
}
{
	open(my $fh, '<', 'sql/snowseq--1.3.sql') or die "sql/snowseq--1.3.sql: $!";
	my $sql = do { local $/; <$fh> };
	close($fh);
	my @hits = script_history($sql);
	is(scalar(@hits), 0, 'sql/snowseq--1.3.sql creates each object once and alters or drops none of them'
		. (@hits ? ': ' . join('; ', @hits) : ''));
	is(scalar(script_history("CREATE TABLE a (x int);\nALTER TABLE a ADD COLUMN y int;\nCREATE VIEW v AS SELECT 1;\nCREATE OR REPLACE VIEW v AS SELECT 2;\nCREATE VIEW \@extschema\@.v AS SELECT 3;\nDROP FUNCTION f();\nALTER TABLE a ENABLE ALWAYS TRIGGER t;\n")), 4,
		'the check finds an ALTER, a CREATE OR REPLACE, a view made twice and a DROP, and lets ENABLE ALWAYS TRIGGER pass');
}


# The SQL is written once (CONTRIBUTING.md, "The SQL scripts"): the areas of
# sql/src/, in the order sql/src/areas declares, make the install script,
# and the update's own part with the areas' blocks the update script
# (sql/build.pl).  The committed scripts are what they make, and the
# builder refuses a broken source.
{
	my ($version) = slurp_file('Makefile') =~ /^EXTVERSION\s*=\s*(\S+)/m;
	my ($prev) = slurp_file('Makefile') =~ /^SQL_PREV\s*=\s*(\S+)/m;
	my @areas = map { "sql/src/$_.sql" } split /\s+/, slurp_file('sql/src/areas');
	ok(@areas >= 8 && !grep({ !-f $_ } @areas), 'sql/src/areas names the areas, each a file: ' . join(' ', @areas));
	my @unlisted = grep { my $f = $_; !grep { $_ eq $f } @areas } grep { !m{/update--} } glob('sql/src/*.sql');
	is(join(' ', @unlisted), '', 'every SQL source in sql/src/ is an area of sql/src/areas or an update\'s part');
	my ($out, $err);
	ok(run_log([ 'perl', 'sql/build.pl', 'install', $version, @areas ], '>', \$out, '2>', \$err), 'the install script builds') or diag($err);
	ok($out eq slurp_file("sql/snowseq--$version.sql"), "sql/snowseq--$version.sql is what the sources make (make sqlcheck shows the difference)");
	ok(run_log([ 'perl', 'sql/build.pl', 'update', "sql/src/update--$prev--$version.sql", @areas ], '>', \$out, '2>', \$err),
		'the update script builds') or diag($err);
	ok($out eq slurp_file("sql/snowseq--$prev--$version.sql"), "sql/snowseq--$prev--$version.sql is what the sources make");
	# the builder itself
	my $dir = tempdir(CLEANUP => 1);
	my %bad = (
		'a block without its end' => [ "--\@block a\nSELECT 1;\n", "--\@include a\n", qr/block a \(line 1\) has no --\@end/ ],
		'an unknown block' => [ "--\@block a\nSELECT 1;\n--\@end\n", "--\@include b\n", qr/no block b in the areas/ ],
		'a block included twice' => [ "--\@block a\nSELECT 1;\n--\@end\n", "--\@include a\n--\@include a\n", qr/block a is included twice/ ],
		'a block defined twice' => [ "--\@block a\n--\@end\n--\@block a\n--\@end\n", "", qr/block a is defined twice/ ]);
	for my $case (sort keys %bad)
	{
		my ($area, $update, $re) = @{ $bad{$case} };
		open(my $fh, '>', "$dir/area.sql") or die; print $fh $area; close($fh);
		open($fh, '>', "$dir/update.sql") or die; print $fh $update; close($fh);
		my $ok = run_log([ 'perl', 'sql/build.pl', 'update', "$dir/update.sql", "$dir/area.sql" ], '>', \$out, '2>', \$err);
		ok(!$ok && $err =~ $re, "the builder refuses $case") or diag($err);
	}
	open(my $fh, '>', "$dir/area.sql") or die;
	print $fh "CREATE FUNCTION f() RETURNS int AS 'x' LANGUAGE C;\n--\@block v\nCREATE VIEW v AS SELECT 1;\nCREATE FUNCTION g() RETURNS int AS 'y' LANGUAGE C;\n--\@end\n";
	close($fh);
	open($fh, '>', "$dir/update.sql") or die; print $fh "ALTER TABLE t ADD COLUMN c int;\n--\@include v replace\n"; close($fh);
	run_log([ 'perl', 'sql/build.pl', 'update', "$dir/update.sql", "$dir/area.sql" ], '>', \$out, '2>', \$err);
	is($out, "ALTER TABLE t ADD COLUMN c int;\nCREATE OR REPLACE VIEW v AS SELECT 1;\nCREATE OR REPLACE FUNCTION g() RETURNS int AS 'y' LANGUAGE C;\n",
		'an update takes a block as the area writes it (replace: CREATE OR REPLACE), nothing else of the area');
}

# States are enum types, each state named once in the SQL sources, in its
# enum: no CHECK or array lists states elsewhere, no statement sets or
# compares with a state it names (it asks a predicate, or stores what
# snowseq_rebalance_next returns), and the labels of a move's states are
# MoveStateNames, in order (a merge's are some of them).
sub sql_text
{
	my ($f) = @_;
	my $t = slurp_file($f);
	$t =~ s/--[^\n]*//g;	# comments may name states
	return $t;
}
# the lists (ARRAY[...] or IN (...)) of two or more quoted labels of a kind,
# outside the enum types and the _is_over functions
sub state_lists
{
	my ($sql, $type, $labels) = @_;
	my %label = map { $_ => 1 } @$labels;
	(my $rest = $sql) =~ s/CREATE TYPE \@extschema\@\.\w+ AS ENUM\s*\(.*?\);//sg;
	$rest =~ s/CREATE FUNCTION \@extschema\@\.\w+_is_over\(.*?;\n//sg;
	my @hits;
	while ($rest =~ /(ARRAY\s*\[[^\]]*\]|\bIN\s*\([^()]*\))/g)
	{
		my $list = $1;
		my @in = grep { $label{$_} } $list =~ /'([^']*)'/g;
		push @hits, $list =~ s/\s+/ /gr if @in >= 2;
	}
	return @hits;
}
{
	my $sources = join("\n", map { sql_text($_) } glob('sql/src/*.sql'));
	my ($names) = $code{'src/shards/records/move_common.c'} =~ /\bMoveStateNames\[\]\s*=\s*\{(.*?)\}/s;
	my @move_names = defined $names ? $names =~ /"(\w+)"/g : ();
	my %labels;
	for my $type (qw(snowseq_move_state snowseq_merge_state snowseq_rebalance_state snowseq_rebalance_step_state))
	{
		my @defs = $sources =~ /CREATE TYPE \@extschema\@\.$type AS ENUM\s*\((.*?)\);/sg;
		is(scalar(@defs), 1, "$type is one enum type of the SQL sources");
		my @l = @defs ? $defs[0] =~ /'([^']+)'/g : ();
		$labels{$type} = \@l;
		my @hits = state_lists($sources, $type, \@l);
		is(scalar(@hits), 0, "no list of ${type}'s labels but the enum and its _is_over function" . (@hits ? ': ' . join('; ', @hits) : ''));
	}
	# and no single state either: no literal of a label outside the enums
	# (the fence's states, FenceStateNames, are another machine's, text on
	# the shard servers; one of them is also called "block")
	my %all = map { $_ => 1 } map { @$_ } values %labels;
	my ($fence) = ($code{'src/shards/server/fence.c'} // '') =~ /\bFenceStateNames\[\]\s*=\s*\{(.*?)\}/s;
	my $fence_set = join(',', sort(($fence // '') =~ /"(\w+)"/g));
	(my $rest = $sources) =~ s/CREATE TYPE \@extschema\@\.\w+ AS ENUM\s*\(.*?\);//sg;
	$rest =~ s/(ARRAY\s*\[([^\]]*)\])/join(',', sort($2 =~ \/'(\w+)'\/g)) eq $fence_set ? '' : $1/ge;
	my @single;
	for my $label (sort keys %all)
	{
		while ($rest =~ /([^\n]*'\Q$label\E'[^\n]*)/g)
		{
			push @single, "'$label': " . ($1 =~ s/^\s+//r);
		}
	}
	ok(length($fence_set) > 0, 'the fence\'s states are read from FenceStateNames');
	is(scalar(@single), 0, 'no statement of the SQL sources names a move, merge or rebalance state (' . scalar(@single) . ' do)'
		. (@single ? ': ' . join('; ', @single) : ''));
	is(join(',', @{ $labels{snowseq_move_state} }), join(',', @move_names),
		'the labels of snowseq_move_state are MoveStateNames, in order');
	my %move = map { $_ => 1 } @move_names;
	ok(@{ $labels{snowseq_merge_state} } >= 5 && !grep({ !$move{$_} } @{ $labels{snowseq_merge_state} }),
		'the labels of snowseq_merge_state are names of MoveStateNames (merge.h takes its states from there)');
	# the state columns have the enum types (a fence's state stays text:
	# the trigger reads it from the table on every shard server, whatever
	# version its catalog is)
	my $install = sql_text('sql/snowseq--1.3.sql');
	my %columns = (snowseq_moves => 'snowseq_move_state', snowseq_merges => 'snowseq_merge_state',
		snowseq_rebalance_runs => 'snowseq_rebalance_state', snowseq_rebalance_steps => 'snowseq_rebalance_step_state');
	for my $table (sort keys %columns)
	{
		my ($def) = $install =~ /CREATE TABLE (?:\@extschema\@\.)?$table \((.*?)\n\);/s;
		like($def // '', qr/^\s*state \@extschema\@\.$columns{$table} NOT NULL(?: DEFAULT '\w+')?,$/m,
			"$table.state is of type $columns{$table}, no CHECK");
	}
	# the check itself: 1.2's CHECK and the view's list of states over
	my @l = @{ $labels{snowseq_move_state} };
	ok(scalar(state_lists("CHECK (state OPERATOR(pg_catalog.=) ANY (ARRAY['prepare', 'copy', 'done']::text[]))", 'snowseq_move_state', \@l)) == 1
		  && scalar(state_lists("WHERE m.state <> ALL (ARRAY['done', 'failed', 'rollback', 'reverted'])", 'snowseq_move_state', \@l)) == 1
		  && scalar(state_lists("WHERE m.state IN ('done', 'failed')", 'snowseq_move_state', \@l)) == 1
		  && scalar(state_lists("WHERE NOT \@extschema\@.snowseq_move_is_over(m.state) AND m.state <> 'rollback'", 'snowseq_move_state', \@l)) == 0,
		'the list check finds a CHECK, an array and an IN list of states, and passes one state compared');
}

# The rebalance reads the map as routing does (issue 39: "routing lookups
# through route.c"): its SQL and the C of its collection name no
# snowseq_shard_map outside messages and comments, only route.c's
# snowseq_route_ranges and snowseq_route_gene.
{
	my @hits;
	for my $f (glob('sql/src/rebalance*.sql'), 'src/shards/operations/shard_stats.c', glob('src/shards/rebalance/rebalance_*.c'))
	{
		my $t = $f =~ /\.sql$/ ? sql_text($f) : $code{$f};
		$t =~ s/'(?:[^']|'')*'//g if $f =~ /\.sql$/;		# messages
		$t =~ s/(?:errmsg|errhint|errdetail)\("(?:[^"\\]|\\.)*"//g unless $f =~ /\.sql$/;
		push @hits, $f if $t =~ /\bsnowseq_shard_map\b/;
	}
	is(join(', ', @hits), '', 'the rebalance and shard_stats read the map through route.c (snowseq_route_ranges, RouteRanges)');
	like($code{'src/shards/operations/shard_stats.c'} // '', qr/\bRouteRanges\(fcinfo->flinfo->fn_oid\)/,
		'shard_stats takes the map from route.c in C (a catalog of 1.2 has no snowseq_route_ranges)');
}

# Every object the SQL sources name outside string literals and function
# bodies is schema-qualified (PostgreSQL's rules for secure extension
# scripts): what is created, commented on, granted, revoked, the table a
# trigger or index is on and the function a trigger runs.  Index, trigger
# and constraint names cannot be qualified.
sub unqualified
{
	my ($t) = @_;
	my $out = '';
	# comments, string literals and dollar-quoted bodies blanked out
	while ($t =~ /\G(.*?)(--[^\n]*|'(?:[^']|'')*'|(\$\w*\$).*?\3|\z)/gsc)
	{
		my ($pre, $tok) = ($1, $2);
		$out .= $pre . ($tok =~ s/[^\n]/ /gr);
		last if $tok eq '';
	}
	my @hits;
	while ($out =~ /(\b(?:INDEX|TRIGGER|CONSTRAINT)\s+)?(?<![.\w@"])(snowseq_\w+)/g)
	{
		push @hits, $2 unless defined $1;
	}
	# and whatever the name, the object a statement creates, comments on,
	# grants or revokes (a table, function, procedure, view, type, operator)
	my $kind = qr/(?:FUNCTION|PROCEDURE|TABLE|VIEW|TYPE|OPERATOR|SEQUENCE|DOMAIN|COLUMN)/;
	while ($out =~ /\b(?:CREATE\s+(?:OR\s+REPLACE\s+)?$kind\s+|COMMENT\s+ON\s+$kind\s+|ON\s+(?:$kind\s+)?(?=\S+\s+(?:TO|FROM)\b))([^\s(]+)/g)
	{
		my $name = $1;
		push @hits, $name unless $name =~ /^(?:\@extschema\@|pg_catalog)\./ || $name =~ /^snowseq_/;
	}
	return @hits;
}
{
	my @hits;
	for my $f (glob('sql/src/*.sql'))
	{
		push @hits, map { "$f: $_" } unqualified(slurp_file($f));
	}
	is(scalar(@hits), 0, 'every object the SQL sources name is qualified with @extschema@' . (@hits ? ' (' . scalar(@hits) . ' are not: ' . join('; ', @hits[0 .. ($#hits < 9 ? $#hits : 9)]) . ')' : ''));
	# the check itself
	is(join(',', unqualified("CREATE PROCEDURE snowseq_merge_shards(x int) AS \$b\$ snowseq_y \$b\$;\nCOMMENT ON PROCEDURE snowseq_merge_shards(int) IS 'snowseq_z';\n"
			. "CREATE TRIGGER snowseq_guard BEFORE INSERT ON \@extschema\@.t FOR EACH ROW EXECUTE FUNCTION snowseq_guard();\n"
			. "CREATE FUNCTION shard_of(id bigint) RETURNS integer AS 'x' LANGUAGE C;\nCREATE OPERATOR <@ (LEFTARG = bigint);\n"
			. "GRANT SELECT (a, b) ON t TO pg_monitor;\nREVOKE ALL ON FUNCTION \@extschema\@.f(int) FROM PUBLIC;\n")),
		'snowseq_merge_shards,snowseq_merge_shards,snowseq_guard,shard_of,<@,t',
		'the check finds unqualified names in DDL, not in bodies, literals or a trigger\'s own name');
}

# No function or procedure body of the install script is over 200 lines
# (a longer one is cut into functions of its own).
{
	my $sql = slurp_file('sql/snowseq--1.3.sql');
	my (@long, $n);
	while ($sql =~ /^CREATE (?:OR REPLACE )?(?:FUNCTION|PROCEDURE)\s+([\w\@.]+)\([^;]*?\bAS\s+(\$\w*\$)\n(.*?)^\s*\2/msg)
	{
		my ($name, $body) = ($1, $3);
		$n++;
		my $lines = () = $body =~ /\n/g;
		push @long, "$name: $lines lines" if $lines > 200;
	}
	ok($n >= 5, "the install script has functions with bodies ($n)");
	is(join('; ', @long), '', 'no function body of the install script is over 200 lines');
}

done_testing();
