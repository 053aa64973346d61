import pytest

from inferasim.serve.kv_pool import KVPool


def test_new_pool_is_all_free():
    pool = KVPool(1000)
    assert (pool.capacity, pool.free, pool.tree, pool.private) == (1000, 1000, 0, 0)
    pool.check()


def test_alloc_and_free_private_conserve_tokens():
    pool = KVPool(1000)
    assert pool.alloc_private(300)
    assert pool.alloc_private(700)
    assert (pool.free, pool.private, pool.used) == (0, 1000, 1000)
    pool.check()
    pool.free_private(400)
    assert (pool.free, pool.private) == (400, 600)
    pool.check()


def test_alloc_beyond_free_fails_without_change():
    pool = KVPool(100)
    assert pool.alloc_private(60)
    assert not pool.alloc_private(41)
    assert (pool.free, pool.private) == (40, 60)
    pool.check()


def test_freeing_more_than_held_is_a_double_free():
    pool = KVPool(100)
    pool.alloc_private(10)
    with pytest.raises(ValueError):
        pool.free_private(11)
    assert (pool.free, pool.private) == (90, 10)


def test_ownership_moves_private_to_tree_to_free():
    pool = KVPool(100)
    pool.alloc_private(64)
    pool.private_to_tree(48)
    assert (pool.free, pool.tree, pool.private) == (36, 48, 16)
    pool.tree_to_free(32)
    assert (pool.free, pool.tree, pool.private) == (68, 16, 16)
    pool.check()
    with pytest.raises(ValueError):
        pool.tree_to_free(17)
    with pytest.raises(ValueError):
        pool.private_to_tree(17)


def test_negative_counts_are_rejected():
    pool = KVPool(10)
    with pytest.raises(ValueError):
        pool.alloc_private(-1)
    with pytest.raises(ValueError):
        KVPool(-1)


def test_check_catches_a_broken_ledger():
    pool = KVPool(10)
    pool.free -= 1  # a token that went nowhere
    with pytest.raises(AssertionError):
        pool.check()
