import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DockerfileError, parseDockerfile } from './parse.js';

test('stages, instructions in both forms, flags and global ARGs', () => {
  const df = parseDockerfile(
    [
      '# syntax=docker/dockerfile:1',
      'ARG BASE=busybox',
      `FROM \${BASE} AS Build`,
      'ENV A=1 B="two words"',
      'RUN echo $A && \\',
      '    echo done',
      'COPY --from=build ["a b", "/dst/"]',
      'CMD ["node", "server.js"]',
      'FROM scratch',
      'COPY --from=build --chmod=755 /x /y',
    ].join('\n'),
  );
  assert.deepEqual(df.globalArgs, [{ name: 'BASE', value: 'busybox', line: 2 }]);
  assert.equal(df.stages.length, 2);
  assert.equal(df.stages[0].name, 'build', 'stage names compare lower-cased');
  const [env, run, copy, cmd] = df.stages[0].steps;
  assert.deepEqual(env.kind === 'ENV' && env.pairs, [
    ['A', '1'],
    ['B', '"two words"'],
  ]);
  assert.equal(
    run.kind === 'RUN' && 'shell' in run.command && run.command.shell.replace(/\s+/g, ' '),
    'echo $A && echo done',
  );
  assert.deepEqual(copy.kind === 'COPY' && [copy.sources, copy.dest, copy.from], [['a b'], '/dst/', 'build']);
  assert.deepEqual(cmd.kind === 'CMD' && cmd.command, { exec: ['node', 'server.js'] });
  assert.match(df.notes[0], /syntax directive .* is ignored/);
  const c2 = df.stages[1].steps[0];
  assert.equal(c2.kind === 'COPY' && c2.chmod, '755');
});

test('what Berth does not build is refused by name, with the line', () => {
  const refused = [
    ['HEALTHCHECK CMD true', /line 2: HEALTHCHECK is not supported/],
    ['SHELL ["bash", "-c"]', /SHELL is not supported/],
    ['VOLUME /data', /VOLUME is not supported/],
    ['ONBUILD RUN x', /ONBUILD is not supported/],
    ['STOPSIGNAL SIGINT', /STOPSIGNAL is not supported/],
    ['RUN --mount=type=cache,target=/x true', /RUN --mount is not supported/],
    ['COPY --link a /b', /COPY --link is not supported/],
    ['RUN <<EOF\necho hi\nEOF', /heredoc is not supported/],
    ['FROBNICATE x', /unknown instruction "FROBNICATE"/],
  ] as const;
  for (const [line, re] of refused)
    assert.throws(
      () => parseDockerfile(`FROM busybox\n${line}\n`),
      (e: Error) => e instanceof DockerfileError && re.test(e.message),
    );
  assert.throws(() => parseDockerfile('RUN true\n'), /RUN before the first FROM/);
  assert.throws(() => parseDockerfile('# nothing\n'), /no FROM/);
  assert.throws(() => parseDockerfile('FROM --platform=linux/s390x busybox\n'), /only this host's platform/);
});
