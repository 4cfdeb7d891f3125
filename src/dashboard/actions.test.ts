import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { actionsJson, runAction, type DashboardActions } from './actions.js';

function switchable(): DashboardActions & { pressed: string[] } {
  let up = true;
  const pressed: string[] = [];
  return {
    pressed,
    list: () => [up ? { id: 'kill:a', label: 'kill', target: 'a', state: 'up' } : { id: 'restore:a', label: 'restore', target: 'a', state: 'killed' }],
    run(id) {
      pressed.push(id);
      if (id === 'restore:a') throw new Error('a cannot restart: port taken');
      up = false;
      return 'a killed';
    },
  };
}

describe('dashboard actions', () => {
  it('presses only an action listed now, answers what it did, and a failure as 500 with its message', async () => {
    const a = switchable();
    assert.deepEqual(await runAction(a, 'restore:a'), { status: 404, body: { error: 'no action "restore:a"' } });
    assert.deepEqual(await runAction(a, 'kill:a'), { status: 200, body: { done: 'a killed' } });
    assert.deepEqual(await runAction(a, 'kill:a'), { status: 404, body: { error: 'no action "kill:a"' } });
    assert.deepEqual(await runAction(a, 'restore:a'), { status: 500, body: { error: 'a cannot restart: port taken' } });
    assert.deepEqual(await runAction(a, '../x'), { status: 404, body: { error: 'no action "../x"' } });
    assert.deepEqual(a.pressed, ['kill:a', 'restore:a']);
  });

  it('lists the buttons under the title, "Actions" by default', () => {
    assert.deepEqual(JSON.parse(actionsJson(switchable())), { title: 'Actions', actions: [{ id: 'kill:a', label: 'kill', target: 'a', state: 'up' }] });
    assert.equal(JSON.parse(actionsJson({ ...switchable(), title: 'Demo controls' })).title, 'Demo controls');
  });
});
