import assert from 'node:assert/strict';
import { test } from 'node:test';
import { canonicalReference, isDefaultImage, parseImageReference } from './image-reference.js';

const canon = (s: string) => {
  const p = parseImageReference(s);
  assert.ok(p.ok, `${s}: ${!p.ok && p.reason}`);
  return canonicalReference(p.ref);
};

test('short names get the default registry, the library namespace and the latest tag', () => {
  assert.equal(canon('python:3.12-slim'), 'docker.io/library/python:3.12-slim');
  assert.equal(canon('node'), 'docker.io/library/node:latest');
  assert.equal(canon('blaxel/base-image'), 'docker.io/blaxel/base-image:latest');
  assert.equal(canon('not_a_valid_image_format'), 'docker.io/library/not_a_valid_image_format:latest');
});

test('a first part with a dot, a port or localhost is a registry', () => {
  assert.equal(canon('ghcr.io/org/app:v1'), 'ghcr.io/org/app:v1');
  assert.equal(canon('127.0.0.1:5000/busybox'), '127.0.0.1:5000/busybox:latest');
  assert.equal(canon('localhost/x/y'), 'localhost/x/y:latest');
  const d = `sha256:${'a'.repeat(64)}`;
  assert.equal(canon(`ghcr.io/org/app@${d}`), `ghcr.io/org/app@${d}`);
  assert.equal(canon(`app:1@${d}`), `docker.io/library/app:1@${d}`);
});

test('malformed references are refused with the reason', () => {
  for (const bad of [
    '',
    ' python',
    'Python:3',
    'python:',
    'python:-x',
    'a//b',
    'app@sha256:short',
    'app@md5:abc',
    'bad host:1/x',
    `x:${'t'.repeat(129)}`,
    '../etc',
  ]) {
    const p = parseImageReference(bad);
    assert.equal(p.ok, false, bad);
    if (!p.ok) assert.match(p.reason, /is not an image reference/);
  }
});

test('the default image is no image or any spelling of blaxel/base-image:latest', () => {
  assert.ok(isDefaultImage(undefined));
  assert.ok(isDefaultImage(''));
  assert.ok(isDefaultImage('blaxel/base-image:latest'));
  assert.ok(isDefaultImage('docker.io/blaxel/base-image'));
  assert.ok(!isDefaultImage('blaxel/base-image:v2'));
  assert.ok(!isDefaultImage('python:3.12-slim'));
});
