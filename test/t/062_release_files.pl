# The files that describe a release agree with each other and with what the
# build installs: the PGXN META.json (valid JSON with the fields PGXN
# requires, semantic versions), snowseq.control, the Makefile, the Debian
# changelog and pgversions, and the install and upgrade scripts: the
# default version has a full script, every script is installed, and every
# version ships an upgrade script to the next one.  No server needed.
use strict;
use warnings;
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;

sub read_text { return slurp_file($_[0]); }

my $control = read_text('snowseq.control');
my ($default) = $control =~ /^default_version\s*=\s*'([^']+)'/m;
ok(defined $default, "snowseq.control names a default version ($default)");
my ($extversion) = read_text('Makefile') =~ /^EXTVERSION\s*=\s*(\S+)/m;
is($extversion, $default, 'the Makefile builds the default version');

# ---- META.json (PGXN meta-spec 1.0.0) ----
my $meta = eval { decode_json(read_text('META.json')) };
ok($meta, 'META.json is valid JSON') or diag($@);
$meta ||= {};
for my $field (qw(name abstract version maintainer license provides meta-spec))
{
	ok(defined $meta->{$field} && $meta->{$field} ne '', "META.json has $field");
}
is($meta->{'meta-spec'}{version}, '1.0.0', 'META.json follows meta-spec 1.0.0');
is($meta->{name}, 'snowseq', 'META.json names the distribution snowseq');
my $semver = qr/^\d+\.\d+\.\d+$/;
like($meta->{version} // '', $semver, 'the distribution version is a semantic version');
is($meta->{version}, "$default.0", "the distribution version is the default version $default");
my $p = $meta->{provides}{snowseq} // {};
is($p->{version}, "$default.0", 'META.json provides snowseq in the default version');
is($p->{file}, "sql/snowseq--$default.sql", 'the file it provides is the install script of the default version');
ok(-f $p->{file}, "$p->{file} exists") if $p->{file};
ok(-f $p->{docfile}, "its documentation $p->{docfile} exists") if $p->{docfile};
# the license names meta-spec 1.0.0 knows
my %LICENSES = map { $_ => 1 } qw(agpl_3 apache_1_1 apache_2_0 artistic_1 artistic_2 bsd freebsd
  gfdl_1_2 gfdl_1_3 gpl_1 gpl_2 gpl_3 lgpl_2_1 lgpl_3_0 mit mozilla_1_0 mozilla_1_1 openssl perl_5
  postgresql qpl_1_0 ssleay sun zlib open_source restricted unrestricted unknown);
ok($LICENSES{ $meta->{license} // '' }, "the license ($meta->{license}) is one PGXN knows");
ok(-f 'LICENSE', 'the licence text is in LICENSE');
my $pg = $meta->{prereqs}{runtime}{requires}{PostgreSQL} // '';
like($pg, $semver, "it requires PostgreSQL $pg");

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

done_testing();
