# README's install line installs into the PostgreSQL its PG_CONFIG names,
# also where another version's pg_config comes first on the PATH (Debian's
# /usr/bin/pg_config names the newest server-dev installed).  The line is
# read from README.md and CONTRIBUTING.md, its version replaced by each one
# installed here, sudo left out, and make install run as make -n install:
# what it would install, and where.  It has teeth where two versions are
# installed (the PostgreSQL 18 chroot of test/matrix.sh also has 17); with
# one, it checks the paths all the same.  No server needed.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;

for my $doc ('README.md', 'CONTRIBUTING.md')
{
	my ($line) = slurp_file($doc) =~ m{^(make PG_CONFIG=\S+.*?install.*?)\s*(?:#.*)?$}m;
	ok($line, "$doc has an install line") or next;
	my @pgc = $line =~ m{PG_CONFIG=(\S+)}g;
	is(scalar(@pgc), 2, "$doc: both make commands name PG_CONFIG ($line)");
	my ($named) = $line =~ m{/postgresql/(\d+)/bin/pg_config};
	for my $pg_config (sort glob('/usr/lib/postgresql/*/bin/pg_config'))
	{
		my ($v) = $pg_config =~ m{/postgresql/(\d+)/};
		my $cmd = $line =~ s{/postgresql/$named/}{/postgresql/$v/}gr;
		$cmd =~ s{\bsudo make install\b}{make -n install};
		$cmd =~ s{^make PG_CONFIG=\S+ &&\s*}{};    # the build itself is test/check.sh's
		my $out = `$cmd 2>&1`;
		is($?, 0, "$doc, PostgreSQL $v: $cmd") or diag($out);
		my $libdir = `$pg_config --pkglibdir`;
		chomp $libdir;
		like($out, qr{\Q$libdir\E/snowseq\.so}, "$doc, PostgreSQL $v: snowseq.so goes to $libdir");
		my @others = grep { $_ ne $v } map { m{/postgresql/(\d+)/} } glob('/usr/lib/postgresql/*/bin/pg_config');
		for my $o (@others)
		{
			unlike($out, qr{/usr/lib/postgresql/$o/}, "$doc, PostgreSQL $v: nothing goes to PostgreSQL ${o}'s tree");
		}
	}
}
done_testing();
