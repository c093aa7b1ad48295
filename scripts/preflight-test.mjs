// Runs before `npm test` (npm's pretest): checks that this machine has what the suite talks to
// (bubblewrap, a Docker daemon that answers, chromium, busybox-static, git, promtool, PostgreSQL on
// 127.0.0.1:5432 or HOLDFAST_TEST_PG) and, when something is missing, fails at once with ONE
// line naming what is missing and the command that installs and starts it (`npm run setup`,
// which `.ci/run` also calls). Prints nothing and exits 0 when everything is there.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

/** How long the Docker daemon and PostgreSQL each get to answer, in milliseconds. */
const ANSWER_TIMEOUT_MS = 10_000;
/** The PostgreSQL server the tests use when HOLDFAST_TEST_PG does not name another. */
const DEFAULT_PG = 'postgres://postgres@127.0.0.1:5432/postgres';
/** The command that installs and starts what is missing (root; apt-get, pg_ctlcluster, dockerd). */
const SETUP_COMMAND = 'npm run setup';

/** The absolute path of `name` on PATH, or undefined. */
function onPath(name) {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir === '') continue;
    const candidate = path.join(dir, name);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      if (fs.statSync(candidate).isFile()) return candidate;
    } catch {}
  }
  return undefined;
}

/** True when something accepts a TCP connection at host:port within the timeout. */
function answers(host, port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(ANSWER_TIMEOUT_MS, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

const missing = [];
for (const [tool, what] of [
  ['bwrap', 'bubblewrap'],
  ['chromium', 'chromium'],
  ['busybox', 'busybox-static'],
  ['git', 'git'],
  ['promtool', 'prometheus (for promtool)'],
]) {
  if (onPath(tool) === undefined) missing.push(what);
}
if (onPath('docker') === undefined) {
  missing.push('docker.io');
} else if (spawnSync('docker', ['info', '--format', '{{.ServerVersion}}'], { stdio: 'ignore', timeout: ANSWER_TIMEOUT_MS }).status !== 0) {
  missing.push('a running dockerd');
}
const pg = new URL(process.env.HOLDFAST_TEST_PG || DEFAULT_PG);
if (!(await answers(pg.hostname || '127.0.0.1', Number(pg.port || 5432)))) missing.push(`PostgreSQL on ${pg.hostname}:${pg.port || 5432}`);

if (missing.length > 0) {
  process.stderr.write(
    `npm test needs ${missing.join(', ')}: run \`${SETUP_COMMAND}\` (installs and starts them; .ci/run calls it), then npm test\n`,
  );
  process.exit(1);
}
