# The files that describe a release agree with each other and with what the
# build installs: the PGXN META.json (valid against the PGXN Meta Spec
# 1.0.0, test/PgxnMeta.pm, which must also refuse broken copies of it),
# snowseq.control, the Makefile, the Debian
# changelog and pgversions, and the install and upgrade scripts: the
# default version has a full script, every script is installed, and every
# version ships an upgrade script to the next one.  The newest entry of
# CHANGELOG.md is a dated release entry a user reads in a minute (at most
# 120 lines), every line of docs/reference.md stays under 600 characters,
# and no binary package or archive (.deb, .jar) is tracked.  No server needed.
use strict;
use warnings;
use File::Find ();
use JSON::PP;
use lib 'test';
use PgxnMeta;
use PostgreSQL::Test::Utils;
use Test::More;

sub read_text { return slurp_file($_[0]); }

# A text file's characters (UTF-8 decoded).
sub read_chars
{
	my $t = slurp_file($_[0]);
	utf8::decode($t);
	return $t;
}

my $control = read_text('snowseq.control');
my ($default) = $control =~ /^default_version\s*=\s*'([^']+)'/m;
ok(defined $default, "snowseq.control names a default version ($default)");
my ($extversion) = read_text('Makefile') =~ /^EXTVERSION\s*=\s*(\S+)/m;
is($extversion, $default, 'the Makefile builds the default version');

# ---- META.json (PGXN meta-spec 1.0.0) ----
my $meta = eval { decode_json(read_text('META.json')) };
ok($meta, 'META.json is valid JSON') or diag($@);
$meta ||= {};
my @invalid = PgxnMeta::errors($meta);
is_deeply(\@invalid, [], 'META.json is valid against the PGXN Meta Spec 1.0.0') or diag(join("\n", @invalid));
# the validator finds what PGXN would refuse (each a copy of META.json
# with one fault)
my %faults = (
	'no provides' => sub { delete $_[0]{provides} },
	'a version that is not semantic' => sub { $_[0]{version} = '1.3' },
	'an unknown license' => sub { $_[0]{license} = 'postgres' },
	'a provided extension without its file' => sub { delete $_[0]{provides}{snowseq}{file} },
	'an unknown release status' => sub { $_[0]{release_status} = 'beta' },
	'an unknown top-level key' => sub { $_[0]{homepage} = 'https://example.org' },
	'an unknown prerequisite phase' => sub { $_[0]{prereqs}{install} = { requires => { PostgreSQL => '15.0.0' } } },
	'a name with a space' => sub { $_[0]{name} = 'snow seq' },
	'a tag with a slash' => sub { $_[0]{tags} = ['a/b'] });
for my $fault (sort keys %faults)
{
	my $copy = decode_json(read_text('META.json'));
	$faults{$fault}->($copy);
	ok(scalar(PgxnMeta::errors($copy)), "the validator refuses $fault");
}
is($meta->{name}, 'snowseq', 'META.json names the distribution snowseq');
is($meta->{version}, "$default.0", "the distribution version is the default version $default");
my $p = $meta->{provides}{snowseq} // {};
is($p->{version}, "$default.0", 'META.json provides snowseq in the default version');
is($p->{file}, "sql/snowseq--$default.sql", 'the file it provides is the install script of the default version');
ok(-f $p->{file}, "$p->{file} exists") if $p->{file};
ok(-f $p->{docfile}, "its documentation $p->{docfile} exists") if $p->{docfile};
ok(-f 'LICENSE', 'the licence text is in LICENSE');
my $pg = $meta->{prereqs}{runtime}{requires}{PostgreSQL} // '';

# ---- Debian ----
my ($deb_version) = read_text('debian/changelog') =~ /^snowseq \(([^)]+)\)/;
my ($upstream) = ($deb_version // '') =~ /^(?:\d+:)?(.*?)(?:-[^-]+)?$/;
is($upstream, $default, "debian/changelog's upstream version ($deb_version) is the default version");
my ($pg_major) = $pg =~ /^(\d+)/;
like(read_text('debian/pgversions'), qr/^\Q$pg_major\E\+$/m,
	"debian/pgversions builds for PostgreSQL $pg_major and later, as META.json requires");
ok(-x 'debian/rules' && -x 'debian/tests/installcheck', 'debian/rules and the package test are executable');

# ---- the scripts ----
my @scripts = map { s{^sql/}{}r } glob('sql/snowseq--*.sql');
my %full = map { /^snowseq--([^-]+)\.sql$/ ? ($1 => 1) : () } @scripts;
my %step = map { /^snowseq--([^-]+)--([^-]+)\.sql$/ ? ($1 => $2) : () } @scripts;
ok($full{$default}, "the default version $default has a full install script");
ok($full{'1.0'}, 'the full script of 1.0 is kept (the upgrade test installs it)');
# from 1.0 on, every version's upgrade script leads to the default one
my ($v, @path) = ('1.0');
while ($v ne $default && exists $step{$v} && @path < 100)
{
	push @path, "$v--$step{$v}";
	$v = $step{$v};
}
is($v, $default, 'upgrade scripts lead from 1.0 to the default version (' . join(', ', @path) . ')');
for my $f (@scripts)
{
	like(read_text("sql/$f"), qr/^\\echo Use "(CREATE|ALTER) EXTENSION snowseq.*\\quit$/m,
		"$f refuses to run outside CREATE/ALTER EXTENSION");
}

# ---- CHANGELOG.md: the newest entry, dated and short ----
my @cl = split /\n/, read_chars('CHANGELOG.md');
my @heads = grep { $cl[$_] =~ /^## / } 0 .. $#cl;
ok(@heads >= 1, 'CHANGELOG.md has release entries');
my $head = @heads ? $cl[ $heads[0] ] : '';
# the name stays ASCII: a wide character in it kills the TAP output where no locale is set
like($head, qr/^## \Q$default\E \x{2014} \d{4}-\d{2}-\d{2}$/,
	"the newest CHANGELOG entry is the default version $default with its date")
  or diag('newest entry: ' . ($head =~ s/[^\x00-\x7f]/?/gr));
my $entry_lines = @heads ? (@heads > 1 ? $heads[1] : scalar(@cl)) - $heads[0] : 0;
cmp_ok($entry_lines, '<=', 120, "the newest CHANGELOG entry is at most 120 lines ($entry_lines)");

# ---- docs/reference.md: short entries ----
my @ref = split /\n/, read_chars('docs/reference.md');
my @long = grep { length($_->[1]) >= 600 } map { [ $_ + 1, $ref[$_] ] } 0 .. $#ref;
is_deeply([ map { "line $_->[0]: " . length($_->[1]) . ' characters' } @long ], [],
	'every line of docs/reference.md is under 600 characters');

# ---- no binaries in the tree ----
# The tests run in a copy of the tree without .git: there, every file of the
# copy but what the build and the tests make (ignored) is a tracked one.
my @binaries;
if (-e '.git')
{
	@binaries = grep { /\.(deb|jar)$/i } split /\n/, `git ls-files`;
	is($?, 0, 'git ls-files lists the tracked files');
}
else
{
	File::Find::find(
		{
			no_chdir => 1,
			wanted => sub {
				if (m{/(node_modules|tmp_check[^/]*|\.git)$}) { $File::Find::prune = 1; return; }
				push @binaries, s{^\./}{}r if -f $_ && /\.(deb|jar)$/i;
			}
		},
		'.');
}
is_deeply([ sort @binaries ], [], 'no .deb or .jar file is in the tree (the tests install them from apt, test/lib.sh)');

done_testing();
