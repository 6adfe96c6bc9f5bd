# Validation of a PGXN distribution's META.json against the PGXN Meta Spec
# 1.0.0 (https://pgxn.org/spec/), field by field: what is required, the
# shape of each field (string, list, map), semantic versions, terms and
# tags, licenses, prerequisite phases and relations, URLs, and custom keys
# (x_ only).  Debian ships no PGXN validator (its pgxnclient installs
# distributions, it does not check them), so the spec's rules are here.
#
#   my @errors = PgxnMeta::errors($decoded_json);   # empty when valid
package PgxnMeta;

use strict;
use warnings;

# semantic version as the spec requires (SemVer 1.0.0: MAJOR.MINOR.PATCH
# and an optional pre-release part of letters, digits and hyphens)
my $SEMVER = qr/\A(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)\.(?:0|[1-9]\d*)(?:[A-Za-z][0-9A-Za-z-]*)?\z/;

my %LICENSES = map { $_ => 1 } qw(agpl_3 apache_1_1 apache_2_0 artistic_1 artistic_2 bsd freebsd
  gfdl_1_2 gfdl_1_3 gpl_1 gpl_2 gpl_3 lgpl_2_1 lgpl_3_0 mit mozilla_1_0 mozilla_1_1 openssl perl_5
  postgresql qpl_1_0 ssleay sun zlib open_source restricted unrestricted unknown);
my %PHASES = map { $_ => 1 } qw(configure build test runtime develop);
my %RELATIONS = map { $_ => 1 } qw(requires recommends suggests conflicts);
my %STATUSES = map { $_ => 1 } qw(stable testing unstable);

# Each checker takes (path, value, \@errors) and records what is wrong.
sub err { my ($e, $path, $msg) = @_; push @$e, "$path: $msg"; return 0; }

sub string
{
	my ($p, $v, $e) = @_;
	return err($e, $p, 'must be a non-empty string') if ref $v || !defined $v || $v eq '';
	return 1;
}

sub version
{
	my ($p, $v, $e) = @_;
	return err($e, $p, 'must be a semantic version (MAJOR.MINOR.PATCH)')
	  if ref $v || !defined $v || $v !~ $SEMVER;
	return 1;
}

# a term: two characters at least, no space, control character, / or \
sub term
{
	my ($p, $v, $e) = @_;
	return err($e, $p, 'must be a term (2 characters or more, no spaces, controls, / or \\)')
	  if ref $v || !defined $v || length($v) < 2 || $v =~ m{[[:space:][:cntrl:]/\\]};
	return 1;
}

sub tag
{
	my ($p, $v, $e) = @_;
	return err($e, $p, 'must be a tag (1 to 256 characters, no controls, / or \\)')
	  if ref $v || !defined $v || length($v) < 1 || length($v) > 256 || $v =~ m{[[:cntrl:]/\\]};
	return 1;
}

sub url
{
	my ($p, $v, $e) = @_;
	return err($e, $p, 'must be a URL with a scheme and a host')
	  if ref $v || !defined $v || $v !~ m{\A[A-Za-z][A-Za-z0-9+.-]*://[^/?#\s]+};
	return 1;
}

sub custom
{
	my ($p, $k, $e) = @_;
	return $k =~ /\Ax_/i ? 1 : err($e, "$p/$k", 'unknown key (custom keys begin with x_)');
}

# a string or a list of values each checked by $each
sub list_of
{
	my ($each) = @_;
	return sub {
		my ($p, $v, $e) = @_;
		return $each->($p, $v, $e) unless ref $v;
		return err($e, $p, 'must be a string or a list') unless ref $v eq 'ARRAY';
		return err($e, $p, 'must not be an empty list') unless @$v;
		$each->("$p\[$_\]", $v->[$_], $e) for 0 .. $#$v;
		return 1;
	};
}

# a map with the given fields ({ name => [checker, required] }); other
# keys are custom ones unless $other checks them
sub map_of
{
	my ($fields, $other) = @_;
	return sub {
		my ($p, $v, $e) = @_;
		return err($e, $p, 'must be a map') unless ref $v eq 'HASH';
		for my $f (sort keys %$fields)
		{
			err($e, "$p/$f", 'required field is missing') if $fields->{$f}[1] && !exists $v->{$f};
		}
		for my $k (sort keys %$v)
		{
			if ($fields->{$k}) { $fields->{$k}[0]->("$p/$k", $v->{$k}, $e); }
			elsif ($other) { $other->($p, $k, $v->{$k}, $e); }
			else { custom($p, $k, $e); }
		}
		return 1;
	};
}

my $license = sub {
	my ($p, $v, $e) = @_;
	if (ref $v eq 'HASH')
	{
		return err($e, $p, 'must not be an empty map') unless %$v;
		url("$p/$_", $v->{$_}, $e) for sort keys %$v;
		return 1;
	}
	return list_of(sub {
		my ($p, $v, $e) = @_;
		return string($p, $v, $e) && ($LICENSES{$v} || err($e, $p, "unknown license \"$v\""));
	})->($p, $v, $e);
};

# "1.2.0", ">= 1.2.0, < 2.0.0", "0"
my $version_range = sub {
	my ($p, $v, $e) = @_;
	return err($e, $p, 'must be a version range') if ref $v || !defined $v || $v eq '';
	for my $part (split /,\s*/, $v)
	{
		next if $part eq '0';
		my $ver = $part =~ s/\A(<=|>=|==|!=|<|>)\s*//r;
		version($p, $ver, $e);
	}
	return 1;
};

my $prereqs = map_of({}, sub {
	my ($p, $phase, $v, $e) = @_;
	return err($e, "$p/$phase", 'unknown phase') unless $PHASES{$phase} || $phase =~ /\Ax_/i;
	map_of({}, sub {
		my ($p, $rel, $v, $e) = @_;
		return err($e, "$p/$rel", 'unknown relation') unless $RELATIONS{$rel} || $rel =~ /\Ax_/i;
		map_of({}, sub {
			my ($p, $name, $v, $e) = @_;
			term("$p/$name", $name, $e);
			$version_range->("$p/$name", $v, $e);
		})->("$p/$rel", $v, $e);
	})->("$p/$phase", $v, $e);
});

my $spec_1_0_0 = map_of({
	name => [ \&term, 1 ],
	abstract => [ \&string, 1 ],
	version => [ \&version, 1 ],
	maintainer => [ list_of(\&string), 1 ],
	license => [ $license, 1 ],
	provides => [
		map_of({}, sub {
			my ($p, $ext, $v, $e) = @_;
			term("$p/$ext", $ext, $e);
			map_of({ file => [ \&string, 1 ], version => [ \&version, 1 ],
					 abstract => [ \&string, 0 ], docfile => [ \&string, 0 ] })->("$p/$ext", $v, $e);
		}), 1 ],
	'meta-spec' => [ map_of({ version => [ \&version, 1 ], url => [ \&url, 0 ] }), 1 ],
	description => [ \&string, 0 ],
	generated_by => [ \&string, 0 ],
	release_status => [
		sub {
			my ($p, $v, $e) = @_;
			return $STATUSES{ $v // '' } ? 1 : err($e, $p, 'must be stable, testing or unstable');
		}, 0 ],
	tags => [ list_of(\&tag), 0 ],
	no_index => [ map_of({ file => [ list_of(\&string), 0 ], directory => [ list_of(\&string), 0 ] }), 0 ],
	prereqs => [ $prereqs, 0 ],
	resources => [
		map_of({
			homepage => [ \&url, 0 ],
			license => [ list_of(\&url), 0 ],
			bugtracker => [ map_of({ web => [ \&url, 0 ], mailto => [ \&string, 0 ] }), 0 ],
			repository => [ map_of({ url => [ \&url, 0 ], web => [ \&url, 0 ],
				type => [ sub {
					my ($p, $v, $e) = @_;
					return string($p, $v, $e) && ($v !~ /[A-Z]/ || err($e, $p, 'must be lower case'));
				}, 0 ] }), 0 ],
		}), 0 ],
});

# The errors of a decoded META.json (an empty list when it is valid).
sub errors
{
	my ($meta) = @_;
	my @e;
	my $spec = ref $meta eq 'HASH' && ref $meta->{'meta-spec'} eq 'HASH' ? $meta->{'meta-spec'}{version} // '' : '';
	return ('/meta-spec/version: must be 1.0.0, the version of the spec checked here') if $spec ne '1.0.0';
	$spec_1_0_0->('', $meta, \@e);
	return @e;
}

1;
