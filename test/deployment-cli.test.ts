import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeEnvironment } from './support/cli-env.js';
import { pemBlock } from './support/secret-samples.js';
import { type CliRun, HOLDFAST_BIN, runHoldfast } from './support/serve-process.js';

describe('holdfast deployment create --bundle (compiled HOLDFAST_BIN, --json)', () => {
  let dir: string;
  let env: Record<string, string>;
  const holdfast = (args: string[]): Promise<CliRun> => runHoldfast(['--json', ...args], env);
  const json = async (args: string[]) => {
    const run = await holdfast(args);
    expect(run.code, run.stderr).toBe(0);
    // biome-ignore lint/suspicious/noExplicitAny: test code reads arbitrary JSON answers
    return JSON.parse(run.stdout) as any;
  };
  const write = (rel: string, content: string) => {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), content);
  };

  beforeAll(() => {
    expect(fs.existsSync(HOLDFAST_BIN), `${HOLDFAST_BIN} is missing: run npm run build first (npm test does)`).toBe(true);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hf-deployment-cli-'));
    env = storeEnvironment(dir);
  });
  afterAll(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('the same bundle directory content twice is the same deployment; show has its size; a private key is refused with its finding', async () => {
    write('a/agent.mjs', 'export default 1;\n');
    write('a/skills/x.md', '# x\n');
    write('b/agent.mjs', 'export default 1;\n');
    write('b/skills/x.md', '# x\n');
    const args = ['deployment', 'create', '--provider', 'local', '--setup', '["true"]', '--env', 'MODE=test'];
    const first = await json([...args, '--bundle', path.join(dir, 'a'), '--publish', 'prod']);
    const second = await json([...args, '--bundle', path.join(dir, 'b')]);
    expect(second.id).toBe(first.id);
    expect(first.spec.bundle).toEqual({ rootTree: expect.stringMatching(/^[0-9a-f]{64}$/), files: 2, bytes: 22 });
    expect(first.channel).toMatchObject({ name: 'prod', deploymentId: first.id });
    const shown = await json(['deployment', 'show', first.id]);
    expect(shown.spec).toMatchObject({ bundle: first.spec.bundle, bundlePath: null, setup: [['true']], env: { MODE: 'test' } });
    expect((await json(['deployment', 'ls'])).map((d: { id: string }) => d.id)).toContain(first.id);

    write('c/agent.mjs', 'export default 1;\n');
    write('c/.ssh/id_ed25519', pemBlock('OPENSSH PRIVATE KEY'));
    const refused = await holdfast([...args, '--bundle', path.join(dir, 'c')]);
    expect(refused.code).not.toBe(0);
    expect(JSON.parse(refused.stderr).error).toMatchObject({ code: 'SECRET_EXCLUDED', data: { path: '.ssh', reason: 'secret-path' } });
  });
});
