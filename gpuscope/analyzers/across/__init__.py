"""Across ranks: each rank's collectives matched with the others', the rank the others wait for (a straggler) with
its cause and price, and the collective a hung job is stuck in, from the flight recorder's dumps."""
